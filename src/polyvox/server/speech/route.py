"""`POST /v1/audio/speech` (OpenAI) and `POST /v1/audio/speech/stream` (uttera-tts-vllm's chunked WAV)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from polyvox.server.deps import get_service, get_tenancy
from polyvox.server.errors import CLIENT_CLOSED
from polyvox.server.protocol import SpeechRequest
from polyvox.server.served_models import check_model
from polyvox.server.speech.parsing import read_speech_request
from polyvox.server.speech.request_policy import streams
from polyvox.server.speech.streaming import SpeechStreamResponse, audio_stream, sse_stream
from polyvox.server.speech.synthesis import ClientGone, SpeechService, until_disconnect
from polyvox.server.speech.timestamps import subtitles_answer, timestamps_answer
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.metering import charge, record
from polyvox.server.tenancy.service import Tenancy
from polyvox.voices.clips import ClipLimits, clip_rate

router = APIRouter(tags=["speech"])

# The body is parsed by hand (JSON or multipart), so its schema is declared for the OpenAPI page.
_SPEECH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": SpeechRequest.model_json_schema()},
            "multipart/form-data": {"schema": SpeechRequest.model_json_schema()},
        },
    }
}


def _no_cache(request: Request) -> bool:
    """`Cache-Control: no-cache` or `no-store` from the client bypasses the audio cache."""
    directives = {
        part.strip().split("=")[0].lower() for part in request.headers.get("cache-control", "").split(",")
    }
    return bool(directives & {"no-cache", "no-store"})


async def _speak(
    request: Request, service: SpeechService, tenancy: Tenancy, defaults: dict[str, Any] | None = None
) -> Response:
    settings = service.settings
    # In flight from here until it holds an admission slot: a drain waits for it, its deadline runs.
    with service.accept() as accepted_at:
        body, reference = await read_speech_request(
            request,
            settings.max_request_bytes,
            defaults,
            max_upload_bytes=settings.max_upload_bytes,
            clip_limits=ClipLimits.from_settings(settings),
            clip_rate=clip_rate(service.backend.info),
        )
        check_model(body.model, service.backend, settings.accept_any_model)
        # the voice, found once (another key's private voice: as an unknown one), before the charge
        voice = None if reference is not None else await service.voice(body.voice, caller_of(request))
        limit_headers = await charge(tenancy, request, body)  # the key's per-minute limits (429 past them)
        job = await service.prepare(
            body,
            voice,
            # Streamed, as OpenAI answers by default; one whole file when asked (`stream: false`) or
            # for a format whose streamed file common readers cannot read (FLAC).
            stream=streams(body),
            accepted_at=accepted_at,
            reference=reference,
            no_cache=_no_cache(request),
        )
        await service.lookup(job)
        headers = job.cache_headers() | limit_headers  # and X-Request-Id (server.request_id adds it)
        try:
            await service.admit(job, request)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
    handed_over = False
    try:
        if not job.plan.stream:
            data = await until_disconnect(request, service.whole(job))
            headers |= job.cache_headers()  # X-Cache now says whether the audio could be stored
            if body.subtitles:
                return subtitles_answer(job, body.response_format, headers)
            if job.plan.timeline is not None:
                return timestamps_answer(job, data, headers)
            return Response(data, media_type=job.plan.content_type, headers=headers)
        # The first audio before the headers: an early failure still gets a status, and an answer the
        # back end lost before any of it went out is run again (`opening`).
        first, pieces = await until_disconnect(request, service.opening(job))
        if body.stream_format == "sse":
            content = sse_stream(first, pieces, job, service.metrics)
            headers |= {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
            media_type = "text/event-stream"
        else:
            content = audio_stream(first, pieces, job, service.metrics)
            headers |= {"X-Accel-Buffering": "no"}
            media_type = job.plan.content_type

        async def close() -> None:
            try:
                await pieces.aclose()
            finally:
                service.release(job)
                await record(tenancy, request, body, job)

        handed_over = True
        return SpeechStreamResponse(content, on_close=close, media_type=media_type, headers=headers)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    finally:
        if not handed_over:
            service.release(job)
            await record(tenancy, request, body, job)


@router.post("/v1/audio/speech", openapi_extra=_SPEECH_BODY)
async def create_speech(
    request: Request,
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """Synthesise `input`: chunked audio as it is made (the default, or `stream_format=audio`), SSE
    (`sse`), or one complete file with Content-Length (`stream: false`, and FLAC unless asked to stream).
    With `timestamp_granularities`: SSE with timestamp events, or else one JSON object (the audio in
    base64 and its timestamps); `response_format` `srt` or `vtt`: subtitles."""
    return await _speak(request, service, tenancy)


@router.post("/v1/audio/speech/stream", openapi_extra=_SPEECH_BODY)
async def create_speech_stream(
    request: Request,
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """uttera-tts-vllm's streaming route: chunked audio, WAV unless `response_format` says otherwise."""
    return await _speak(
        request, service, tenancy, defaults={"response_format": "wav", "stream_format": "audio"}
    )
