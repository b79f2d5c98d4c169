"""Streamed speech responses: chunked audio and OpenAI's SSE events, with a response class that
always closes its body iterator and releases the request's admission slot, however it ends."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from polyvox.engines.errors import EngineError, EngineInputError
from polyvox.server.errors import DeadlineExceeded, error_body, from_engine_error
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import SpeechAudioDelta, SpeechAudioDone
from polyvox.server.synthesis import SpeechJob

log = logging.getLogger(__name__)


class SpeechStreamResponse(StreamingResponse):
    """A StreamingResponse whose `on_close` runs exactly once: on completion, error or disconnect."""

    def __init__(self, content: AsyncIterator[bytes], on_close: Callable[[], Awaitable[None]], **kwargs):
        super().__init__(content, **kwargs)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                aclose = getattr(self.body_iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                await self._on_close()


async def audio_stream(first: bytes, rest: AsyncIterator[bytes], job: SpeechJob, metrics: Metrics):
    """Chunked audio. An engine failure after the headers went out aborts the connection, so the
    client sees a truncated transfer rather than a short file that looks complete."""
    if first:
        yield first
    try:
        async for piece in rest:
            yield piece
    except (EngineError, EngineInputError, DeadlineExceeded) as exc:
        metrics.errors.labels(type=from_engine_error(exc).code or "engine_error").inc()
        log.error("request %s failed mid-stream: %s", job.request.request_id, exc)
        raise


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def sse_stream(first: bytes, rest: AsyncIterator[bytes], job: SpeechJob, metrics: Metrics):
    """OpenAI's SSE: `speech.audio.delta` events whose `audio` is base64 of the next bytes of the
    file in `response_format` (joined, they equal the `stream_format=audio` body), then
    `speech.audio.done` with usage. A mid-stream engine failure ends with an `error` event."""

    def delta(piece: bytes) -> bytes:
        return _event(SpeechAudioDelta(audio=base64.b64encode(piece).decode()).model_dump())

    if first:
        yield delta(first)
    try:
        async for piece in rest:
            yield delta(piece)
    except (EngineError, EngineInputError, DeadlineExceeded) as exc:
        error = from_engine_error(exc)
        metrics.errors.labels(type=error.code or error.type).inc()
        log.error("request %s failed mid-stream: %s", job.request.request_id, exc)
        yield _event({"type": "error", **error_body(error.message, error.type, error.param, error.code)})
        return
    yield _event(SpeechAudioDone(usage=job.usage()).model_dump())
