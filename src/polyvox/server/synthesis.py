"""Turns a validated speech request into encoded audio: shapes the engine request, takes an
admission slot, drives the engine's chunks through the OutputPipeline off the event loop, and
counts what it produced. Routes stay thin; everything a speech route does happens here."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import numpy as np
from starlette.requests import Request

from polyvox.audio import formats
from polyvox.audio.encode import wav_header
from polyvox.audio.errors import UnsupportedFormat
from polyvox.audio.pipeline import OutputPipeline
from polyvox.engines.base import OPENAI_VOICES, Engine, EngineInfo, ReferenceAudio, SynthesisRequest
from polyvox.server.admission import Admission, Overloaded
from polyvox.server.errors import APIError, DeadlineExceeded
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import SpeechRequest, SpeechUsage
from polyvox.settings import Settings

T = TypeVar("T")

# Usage accounting for SSE `speech.audio.done`: input tokens are characters of input (engines do not
# share a tokenizer); output tokens are 20 ms audio frames, i.e. 50 per second of audio.
OUTPUT_TOKENS_PER_SECOND = 50


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


@dataclass
class SpeechJob:
    """One speech request, ready to run: the engine request and how its audio is to be delivered."""

    request: SynthesisRequest
    fmt: formats.AudioFormat
    out_rate: int
    pipeline_speed: float
    stream: bool
    received_at: float = field(default_factory=time.perf_counter)
    audio_seconds: float = 0.0

    @property
    def content_type(self) -> str:
        return self.fmt.content_type(self.out_rate)

    def usage(self) -> SpeechUsage:
        input_tokens = len(self.request.text)
        output_tokens = math.ceil(self.audio_seconds * OUTPUT_TOKENS_PER_SECOND)
        return SpeechUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )


class SpeechService:
    """Everything between a parsed `SpeechRequest` and the bytes a client receives."""

    def __init__(self, engine: Engine, settings: Settings, metrics: Metrics):
        self.engine = engine
        self.settings = settings
        self.metrics = metrics
        self.admission = Admission(
            settings.max_concurrent_requests, settings.max_queue, on_change=metrics.admission_changed
        )
        # Encoding and resampling threads, bounded apart from anyio's shared default pool.
        self.limiter = anyio.CapacityLimiter(max(4, settings.max_concurrent_requests))

    def voices(self) -> list[str]:
        """OpenAI's voice names followed by any the engine adds."""
        return list(dict.fromkeys((*OPENAI_VOICES, *self.engine.info.voices)))

    def prepare(
        self, body: SpeechRequest, *, stream: bool, reference: ReferenceAudio | None = None
    ) -> SpeechJob:
        """Check the request against settings and engine; APIError / EngineInputError if it cannot run."""
        if not self.engine.ready:
            raise APIError(
                503, "the engine is still starting", code="engine_not_ready", headers={"Retry-After": "5"}
            )
        text = body.input
        if not text.strip():
            raise APIError(400, "input must contain text to speak", param="input", code="empty_input")
        if len(text) > self.settings.max_input_chars:
            raise APIError(
                413,
                f"input is {len(text)} characters; the limit is {self.settings.max_input_chars}",
                param="input",
                code="input_too_long",
            )
        if body.voice not in self.voices():
            raise APIError(
                400,
                f"unknown voice {body.voice!r}; GET /v1/audio/voices lists the voices",
                param="voice",
                code="voice_not_found",
            )
        try:
            fmt, out_rate = formats.resolve(body.response_format, body.sample_rate)
        except UnsupportedFormat as exc:
            raise APIError(400, exc.message, param=exc.param, code="unsupported_format") from exc
        engine_speed, pipeline_speed = split_speed(self.engine.info, body.speed)
        request = SynthesisRequest(
            text=text,
            voice=body.voice,
            instructions=body.instructions,
            speed=engine_speed,
            seed=body.seed,
            cfg_value=body.cfg_value,
            inference_timesteps=body.inference_timesteps,
            reference=reference,
            request_id=uuid.uuid4().hex,
        )
        self.engine.validate(request)
        return SpeechJob(request, fmt, out_rate, pipeline_speed, stream)

    async def admit(self, request: Request) -> None:
        """Take an admission slot (waiting in line); 429 when the line is full, ClientGone on disconnect."""
        try:
            await until_disconnect(request, self.admission.acquire())
        except Overloaded as exc:
            raise APIError(
                429, str(exc), code="rate_limit_exceeded", headers={"Retry-After": str(exc.retry_after_s)}
            ) from exc

    def release(self, job: SpeechJob) -> None:
        self.admission.release()
        self.admission.observe_latency(time.perf_counter() - job.received_at)

    async def audio(self, job: SpeechJob) -> AsyncIterator[bytes]:
        """The encoded response, piece by piece as the engine makes audio. Closing it cancels the engine.

        Raises DeadlineExceeded once the request has run `settings.request_timeout_s`."""
        deadline = job.received_at + self.settings.request_timeout_s
        pipeline = await anyio.to_thread.run_sync(
            OutputPipeline, self.engine.info.sample_rate, job.out_rate, job.fmt, job.pipeline_speed
        )
        chunks = aiter(self.engine.generate(job.request))
        self.metrics.input_chars.inc(len(job.request.text))
        first = True
        try:
            while True:
                try:
                    async with asyncio.timeout(deadline - time.perf_counter()):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except TimeoutError as exc:
                    raise DeadlineExceeded(self.settings.request_timeout_s) from exc
                samples = np.asarray(chunk, dtype=np.float32).reshape(-1)
                seconds = samples.size / self.engine.info.sample_rate / job.pipeline_speed
                job.audio_seconds += seconds
                self.metrics.audio_seconds.inc(seconds)
                data = await anyio.to_thread.run_sync(pipeline.push, samples, limiter=self.limiter)
                if data:
                    if first:
                        first = False
                        self._observe_ttfa(job)
                    yield data
            tail = await anyio.to_thread.run_sync(pipeline.finish, limiter=self.limiter)
            if tail:
                if first:
                    self._observe_ttfa(job)
                yield tail
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    def _observe_ttfa(self, job: SpeechJob) -> None:
        self.metrics.ttfa.labels(stream=str(job.stream).lower()).observe(
            time.perf_counter() - job.received_at
        )

    async def whole(self, job: SpeechJob) -> bytes:
        """The complete file for a non-streamed answer (WAV gets its exact sizes)."""
        return complete_file(b"".join([piece async for piece in self.audio(job)]), job.fmt, job.out_rate)


def split_speed(info: EngineInfo, speed: float) -> tuple[float, float]:
    """(engine speed, pipeline speed) whose product is `speed`: engines with native speed apply it
    (up to `info.extra["max_native_speed"]`), the OutputPipeline time-stretches the rest."""
    engine_speed = min(speed, float(info.extra.get("max_native_speed", "inf"))) if info.native_speed else 1.0
    return engine_speed, speed / engine_speed


def complete_file(data: bytes, fmt: formats.AudioFormat, sample_rate: int) -> bytes:
    """A whole stream-encoded file made exact: WAV gets its real sizes instead of the streaming ones."""
    if fmt.name == "wav" and len(data) >= 44:
        return wav_header(sample_rate, (len(data) - 44) // 2) + data[44:]
    return data


async def wait_for_disconnect(request: Request) -> None:
    """Returns when the client has gone (call only once the request body has been read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it and raising ClientGone if the client disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
    if task.cancelled() or not task.done():
        await asyncio.gather(task, return_exceptions=True)
        raise ClientGone()
    return task.result()
