"""ElevenLabs' text-to-speech over HTTP, under `/elevenlabs`: `POST /v1/text-to-speech/{voice_id}` (the
whole file), `.../stream` (chunked audio), `.../with-timestamps` (JSON: the audio in base64 and each
character's times) and `.../stream/with-timestamps` (one such JSON object per line as the audio is made),
and `GET /v1/voices` (polyvox's voices as ElevenLabs lists them). Errors are OpenAI's shape, as on
`/v1/audio/speech` (the ElevenLabs clients read only the status)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator

from fastapi import APIRouter, Depends, Query, Request, Response

from polyvox.server.deps import get_service, get_tenancy
from polyvox.server.elevenlabs.alignment import EMPTY, CharacterTimes, character_times
from polyvox.server.elevenlabs.answer import Answer, read_limited, start_answer
from polyvox.server.elevenlabs.output_format import OutputFormat, parse_output_format
from polyvox.server.elevenlabs.requests import read_body, speech_fields, speech_request
from polyvox.server.elevenlabs.words import answer_words, wants_words
from polyvox.server.errors import CLIENT_CLOSED
from polyvox.server.speech.streaming import SpeechStreamResponse, audio_stream
from polyvox.server.speech.synthesis import ClientGone, SpeechService
from polyvox.server.tenancy.service import Tenancy

PREFIX = "/elevenlabs"
router = APIRouter(prefix=PREFIX, tags=["elevenlabs"])

_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["text"],
                    "properties": {
                        "text": {"type": "string"},
                        "model_id": {"type": "string"},
                        "voice_settings": {"type": "object", "properties": {"speed": {"type": "number"}}},
                        "seed": {"type": "integer"},
                        "apply_text_normalization": {"type": "string", "enum": ["auto", "on", "off"]},
                    },
                }
            }
        },
    }
}


async def _start(
    request: Request,
    service: SpeechService,
    tenancy: Tenancy,
    voice_id: str,
    output_format: str | None,
    *,
    stream: bool,
    timed: bool = False,
) -> tuple[Answer, OutputFormat, str]:
    output = parse_output_format(output_format)
    tts = read_body(await read_limited(request, service.settings.max_request_bytes))
    fields = speech_fields(voice_id, tts.voice_settings, tts.apply_text_normalization, tts.seed)
    fields |= {
        "input": tts.text,
        "response_format": output.response_format,
        "sample_rate": output.sample_rate,
        "stream": stream,
    }
    if timed:
        fields |= wants_words()
    body = speech_request(fields)
    return await start_answer(request, service, tenancy, body, output, stream=stream), output, tts.text


@router.post("/v1/text-to-speech/{voice_id}", openapi_extra=_BODY)
async def text_to_speech(
    request: Request,
    voice_id: str,
    output_format: str | None = Query(None),
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """The whole file in `output_format` (ElevenLabs' default `mp3_44100_128`)."""
    try:
        answer, output, _ = await _start(request, service, tenancy, voice_id, output_format, stream=False)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    try:
        data = answer.first + b"".join([piece async for piece in answer.rest()])
    finally:
        await answer.close()
    return Response(data, media_type=output.media_type, headers=answer.job.cache_headers())


@router.post("/v1/text-to-speech/{voice_id}/stream", openapi_extra=_BODY)
async def text_to_speech_stream(
    request: Request,
    voice_id: str,
    output_format: str | None = Query(None),
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """Chunked audio in `output_format` as it is made."""
    try:
        answer, output, _ = await _start(request, service, tenancy, voice_id, output_format, stream=True)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    content = audio_stream(answer.first, answer.rest(), answer.job, service.metrics)
    headers = answer.job.cache_headers() | {"X-Accel-Buffering": "no"}
    return SpeechStreamResponse(content, on_close=answer.close, media_type=output.media_type, headers=headers)


@router.post("/v1/text-to-speech/{voice_id}/with-timestamps", openapi_extra=_BODY)
async def text_to_speech_with_timestamps(
    request: Request,
    voice_id: str,
    output_format: str | None = Query(None),
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """`{"audio_base64", "alignment", "normalized_alignment"}`: the whole file and each character's
    start and end in seconds (the same characters for both alignments: the text as sent)."""
    try:
        answer, _, text = await _start(
            request, service, tenancy, voice_id, output_format, stream=False, timed=True
        )
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    try:
        data = answer.first + b"".join([piece async for piece in answer.rest()])
    finally:
        await answer.close()
    times = _times(answer, text, audio_end=answer.job.audio_seconds)
    payload = {
        "audio_base64": base64.b64encode(data).decode(),
        "alignment": times.as_http() if times is not None else None,
        "normalized_alignment": times.as_http() if times is not None else None,
    }
    return Response(json.dumps(payload), media_type="application/json", headers=answer.job.cache_headers())


@router.post("/v1/text-to-speech/{voice_id}/stream/with-timestamps", openapi_extra=_BODY)
async def text_to_speech_stream_with_timestamps(
    request: Request,
    voice_id: str,
    output_format: str | None = Query(None),
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> Response:
    """One JSON object per line as the audio is made: `audio_base64` and the alignment of the
    characters timed since the line before (times on the answer's clock), `null` when none are."""
    try:
        answer, _, text = await _start(
            request, service, tenancy, voice_id, output_format, stream=True, timed=True
        )
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    content = _timed_lines(answer, text)
    headers = answer.job.cache_headers() | {"X-Accel-Buffering": "no"}
    media = "application/json"
    return SpeechStreamResponse(content, on_close=answer.close, media_type=media, headers=headers)


async def _timed_lines(answer: Answer, text: str) -> AsyncGenerator[bytes, None]:
    sent = 0  # characters whose times went out
    audio = audio_stream(answer.first, answer.rest(), answer.job, answer.service.metrics)
    async for piece in audio:
        times = _times(answer, text)
        settled = times.settled if times is not None else 0
        yield _line(piece, times.part(sent, settled) if times is not None and settled > sent else EMPTY)
        sent = max(sent, settled)
    times = _times(answer, text, audio_end=answer.job.audio_seconds)
    if times is not None and len(times.chars) > sent:
        yield _line(b"", times.part(sent))


def _times(answer: Answer, text: str, audio_end: float | None = None) -> CharacterTimes | None:
    """`text`'s characters timed by the words known so far (None: the answer has no word timings)."""
    words = answer_words(answer.job)
    return character_times(text, words, audio_end) if words is not None else None


def _line(audio: bytes, times: CharacterTimes) -> bytes:
    alignment = times.as_http() if times.chars else None
    payload = {
        "audio_base64": base64.b64encode(audio).decode(),
        "alignment": alignment,
        "normalized_alignment": alignment,
    }
    return (json.dumps(payload) + "\n").encode()
