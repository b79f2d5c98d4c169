"""Streamed speech responses: chunked audio and OpenAI's SSE events, with a response class that
always closes its body iterator and releases the request's admission slot, however it ends, and
cuts a chunked transfer short (without a traceback) when synthesis fails after the headers."""

from __future__ import annotations

import base64
import contextvars
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.server.errors import APIError, DeadlineExceeded, error_body, from_backend_error
from polyvox.server.last_chunk import is_last_chunk
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import SpeechAudioDelta, SpeechAudioDone
from polyvox.server.speech.synthesis import SpeechJob
from polyvox.server.speech.timestamps import all_timestamps, piece_event

log = logging.getLogger(__name__)

# What may end a stream after its headers went out: expected outcomes, answered and logged as such.
MID_STREAM_FAILURES = (BackendError, BackendInputError, DeadlineExceeded)

# uvicorn's own line when an app returns with its response unfinished, as a cut stream does.
_UNFINISHED = "ASGI callable returned without completing response."
# Set in the task of a request whose stream was cut on purpose (uvicorn logs in that same task).
_cut_on_purpose: contextvars.ContextVar[bool] = contextvars.ContextVar("polyvox_stream_cut", default=False)


class StreamCut(Exception):
    """A chunked answer must end without its final chunk, so the client sees a truncated transfer
    rather than a short file that looks complete. The failure behind it is already counted and logged."""


class _CutStreamFilter(logging.Filter):
    """Drops uvicorn's "returned without completing response" error for streams cut on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_cut_on_purpose.get() and record.msg == _UNFINISHED)


_CUT_STREAM_FILTER = _CutStreamFilter()


def quiet_cut_streams() -> None:
    """Keep uvicorn from logging a deliberately cut stream as an application error (idempotent)."""
    logger = logging.getLogger("uvicorn.error")
    if _CUT_STREAM_FILTER not in logger.filters:
        logger.addFilter(_CUT_STREAM_FILTER)


class SpeechStreamResponse(StreamingResponse):
    """A StreamingResponse whose `on_close` runs exactly once: on completion, error or disconnect. A
    finished answer runs it before its last message goes out (the chunked transfer's end), so a client
    that has the whole answer finds its request released and its usage recorded; a clean-up that fails
    then is logged, and the client still gets its answer's end."""

    def __init__(
        self, content: AsyncGenerator[bytes, None], on_close: Callable[[], Awaitable[None]], **kwargs: Any
    ):
        super().__init__(content, **kwargs)
        self._content = content
        self._on_close = on_close
        self._closed = False

    async def _close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                await self._content.aclose()
            finally:
                await self._on_close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if is_last_chunk(message):
                try:
                    await self._close()
                except Exception:
                    log.exception("the clean-up of a finished answer failed")
            await send(message)

        try:
            await super().__call__(scope, receive, sending)
        except StreamCut:
            # Returning with the response unfinished makes the server close the connection without
            # the final chunk; raising would log a traceback for an outcome already answered.
            _cut_on_purpose.set(True)
        finally:
            await self._close()


def _ended_early(exc: Exception, job: SpeechJob, metrics: Metrics) -> APIError:
    """Count and log, once, a failure after the headers: a deadline is an expected outcome (a
    warning), a back-end failure an error."""
    error = from_backend_error(exc)
    metrics.errors.labels(type=error.code or error.type).inc()
    level = logging.WARNING if isinstance(exc, DeadlineExceeded) else logging.ERROR
    log.log(level, "request %s ended mid-stream: %s", job.plan.request.request_id, exc)
    return error


async def audio_stream(
    first: bytes, rest: AsyncIterator[bytes], job: SpeechJob, metrics: Metrics
) -> AsyncGenerator[bytes, None]:
    """Chunked audio. A back-end failure after the headers went out aborts the connection, so the
    client sees a truncated transfer rather than a short file that looks complete."""
    if first:
        yield first
    try:
        async for piece in rest:
            yield piece
    except MID_STREAM_FAILURES as exc:
        _ended_early(exc, job, metrics)
        raise StreamCut from exc


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def sse_stream(
    first: bytes, rest: AsyncIterator[bytes], job: SpeechJob, metrics: Metrics
) -> AsyncGenerator[bytes, None]:
    """OpenAI's SSE: `speech.audio.delta` events whose `audio` is base64 of the next bytes of the
    file in `response_format` (joined, they equal the `stream_format=audio` body), then
    `speech.audio.done` with usage. A mid-stream back-end failure ends with an `error` event.

    With `timestamp_granularities`, each piece's `speech.audio.timestamps` event goes out as soon as
    it is timed, before the next delta, and `speech.audio.done` carries them all."""

    def delta(piece: bytes) -> bytes:
        return _event(SpeechAudioDelta(audio=base64.b64encode(piece).decode()).model_dump())

    def timed() -> list[bytes]:
        pieces = job.plan.timeline.take() if job.plan.timeline is not None else []
        return [_event(piece_event(p, job.plan.granularities).model_dump(exclude_none=True)) for p in pieces]

    for event in timed():
        yield event
    if first:
        yield delta(first)
    try:
        async for piece in rest:
            for event in timed():
                yield event
            yield delta(piece)
    except MID_STREAM_FAILURES as exc:
        error = _ended_early(exc, job, metrics)
        yield _event({"type": "error", **error_body(error.message, error.type, error.param, error.code)})
        return
    for event in timed():
        yield event
    done = SpeechAudioDone(usage=job.usage(), **all_timestamps(job))
    yield _event(done.model_dump(exclude_none=True))
