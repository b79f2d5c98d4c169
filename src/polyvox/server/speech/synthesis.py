"""Turns a validated speech request into encoded audio: decides its plan once (the back end's request,
its text prepared into checked pieces by the text step, `TextPipeline`), takes an admission slot,
speaks the plan's pieces on the back end through the text step, drives the chunks through the
OutputPipeline off the event loop, and counts what it produced. Routes stay thin; everything a speech
route does happens here (the job itself is `job`, cache rules `caching`, audio shaping `output`,
disconnects `disconnect`)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import random
import re
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import numpy as np
from starlette.requests import Request

from polyvox.alignment.timeline import Timeline
from polyvox.audio import formats
from polyvox.audio.errors import UnsupportedFormat
from polyvox.audio.pipeline import OutputPipeline
from polyvox.backends.base import (
    AdapterInfo,
    AudioStream,
    Backend,
    ReferenceAudio,
    SynthesisRequest,
)
from polyvox.backends.errors import AudioLost
from polyvox.backends.rerun import opened
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.cache import AudioStore
from polyvox.runtime.logs import request_id_var
from polyvox.server import access_log, tracing
from polyvox.server.errors import APIError, DeadlineExceeded, shutting_down_error
from polyvox.server.lifecycle.draining import Lifecycle
from polyvox.server.lifecycle.idle_unload import ColdStart
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.admission import Admission, Overloaded
from polyvox.server.speech.caching import SpeechCache
from polyvox.server.speech.disconnect import ClientGone as ClientGone
from polyvox.server.speech.disconnect import until_disconnect
from polyvox.server.speech.encode_pool import EncodePool
from polyvox.server.speech.job import SpeechJob, SpeechPlan
from polyvox.server.speech.output import cached_chunks
from polyvox.server.speech.request_policy import default_rate, instructions_for, timed
from polyvox.server.tenancy.caller import Caller, caller_of
from polyvox.server.tenancy.ownership import check_speakable
from polyvox.settings import Settings
from polyvox.voices.errors import VoiceNotFound
from polyvox.voices.registry import ResolvedVoice, VoiceRegistry

log = logging.getLogger(__name__)

# Control characters (NUL, escape...) are spoken as spaces: no back end should ever see them.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

T = TypeVar("T")


class SpeechService:
    """Everything between a parsed `SpeechRequest` and the bytes a client receives."""

    def __init__(
        self,
        backend: Backend,
        text: TextPipeline,
        settings: Settings,
        metrics: Metrics,
        voice_registry: VoiceRegistry,
        cache_store: AudioStore | None,
        lifecycle: Lifecycle | None = None,
        engine_served: Callable[[], bool] = lambda: False,
        cold_start: ColdStart | None = None,
    ):
        """`backend`: the model back end, spoken on; `text`: the text step that prepares each request's pieces
        for its plan and speaks them on `backend`. `cache_store`: where the audio cache lives (`open_cache` on
        disk, or Redis' with `state_url`); None when caching is off. `engine_served`: whether the back end has
        started and served (then one not ready is restarting, and a request waits for it)."""
        self.backend = backend
        self.text = text
        self.engine_served = engine_served
        self.cold_start = cold_start  # idle_unload_s / load_on_demand: a cold back end loads for a request
        self.settings = settings
        self.metrics = metrics
        self.lifecycle = lifecycle or Lifecycle()
        # Builtin, registered and uploaded voices, and the back end's own names and adapters.
        self.voice_registry = voice_registry
        self.admission = Admission(
            settings.max_concurrent_requests, settings.max_queue, on_change=metrics.admission_changed
        )
        # Resampling and encoding of every response, off the event loop.
        self.encode_pool = EncodePool.from_settings(settings)
        # Cache reads and writes wait on the disk, not a core: a pool of their own, so they never hold
        # an encoding thread.
        self.cache = SpeechCache(
            cache_store, metrics, anyio.CapacityLimiter(max(4, settings.max_concurrent_requests))
        )

    def busy(self) -> bool:
        """Whether a speech request is in flight: accepted, waiting for a slot, or running."""
        return self.lifecycle.accepted + self.admission.running + self.admission.waiting > 0

    @contextlib.contextmanager
    def accept(self) -> Iterator[float]:
        """Accept a request that will use the back end (503 while draining: the one place a drain refuses
        one) and count it in flight for the block, until it holds an admission slot (which counts it
        from then on); yields the moment it was accepted, where its deadline starts. A drain waits for
        what was accepted before it began, and lets it run to its end."""
        if self.lifecycle.draining:
            raise shutting_down_error()
        with self.lifecycle.accepting() as accepted_at:
            yield accepted_at

    async def _engine_ready(self, accepted_at: float) -> None:
        """Return once the back end can take the request. One that served and is restarting (its only
        engine process died, or a supervisor rebuilds it) is waited for until the request's deadline, as
        the requests it held are; 503 `engine_not_ready` past that, or at once while the back end is still
        starting for the first time, or failed to. A cold back end (unloaded on purpose) is loaded."""
        if self.cold_start is not None:
            await self._before_deadline(self.cold_start.loaded(), accepted_at)
        if self.backend.ready:
            return
        if self.engine_served():
            remaining = accepted_at + self.settings.request_timeout_s - time.perf_counter()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.backend.until_ready(), max(0.0, remaining))
            if self.backend.ready:
                return
        raise APIError(
            503,
            "the engine is not ready (starting, or restarting after a failure: GET /ready says which)",
            code="engine_not_ready",
            headers={"Retry-After": "5"},
        )

    async def voice(self, name: str, caller: Caller) -> ResolvedVoice:
        """The voice `name` for `caller`, found once per request (`VoiceRegistry.find`); 400
        `voice_not_found` for a name no voice has, and alike for another key's private voice (as an
        unknown one: `check_speakable`). Called before the request is charged, looked up in the cache
        or anything slow runs for it; `prepare` makes it ready to speak."""
        try:
            voice = await self.voice_registry.find(name, self.backend)
            check_speakable(caller, voice)
        except VoiceNotFound as exc:
            raise APIError(400, exc.message, param="voice", code="voice_not_found") from exc
        return voice

    async def _before_deadline(self, work: Awaitable[T], accepted_at: float) -> T:
        """`work`'s result, or DeadlineExceeded at the request's deadline (the work itself runs on)."""
        task = asyncio.ensure_future(work)
        remaining = accepted_at + self.settings.request_timeout_s - time.perf_counter()
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, remaining))
        except TimeoutError as exc:
            task.add_done_callback(_retrieve)
            raise DeadlineExceeded(self.settings.request_timeout_s) from exc

    async def prepare(
        self,
        body: SpeechRequest,
        voice: ResolvedVoice | None,
        *,
        stream: bool,
        accepted_at: float,
        reference: ReferenceAudio | None = None,
        no_cache: bool = False,
    ) -> SpeechJob:
        """The job for `body` in `voice` (what `voice()` found; None with a `reference`), its plan
        decided here once and checked against settings and back end; APIError / BackendInputError if it
        cannot run. `accepted_at` is when `accept()` took the request: its deadline runs from there.

        `reference` is an uploaded one-off clone (it replaces the voice; never cached); `no_cache` is
        the client's `Cache-Control: no-cache | no-store`. The sampling seed is fixed here, the client's
        or one drawn for it, so that every run of the request (one run again, a rank's resend) is the
        same; the cache key holds the client's own."""
        await self._engine_ready(accepted_at)
        if voice is not None:
            # a builtin voice of a back end that clones is frozen into its reference on first use, waited
            # for until the request's deadline (the freeze itself runs on for the requests after it)
            voice = await self._before_deadline(self.voice_registry.ready(voice, self.backend), accepted_at)
        text = _CONTROL_CHARS.sub(" ", body.input)  # text with nothing to say: `EmptyInput`, in `checked`
        _check_lengths(
            self.settings.max_input_chars, input=text, instructions=body.instructions, ref_text=body.ref_text
        )
        fmt, out_rate = self._format(body)
        backend_speed, pipeline_speed = self.backend.info.capabilities.split_speed(body.speed)
        granularities = timed(body)
        lora = self._adapter(body, voice)
        request = SynthesisRequest(
            text=text,
            voice=body.voice,
            instructions=instructions_for(self.settings, body.voice, body.instructions),
            emotion=body.emotion if body.emotion is not None or voice is None else voice.emotion,
            speed=backend_speed,
            seed=body.seed if body.seed is not None else random.getrandbits(31),
            cfg_value=body.cfg_value if body.cfg_value is not None or voice is None else voice.cfg_value,
            inference_timesteps=body.inference_timesteps
            if body.inference_timesteps is not None or voice is None
            else voice.inference_timesteps,
            reference=reference if reference is not None or voice is None else voice.reference,
            normalize=body.normalize,
            lora=lora.name if lora is not None else None,
            lora_digest=lora.digest if lora is not None else None,
            request_id=uuid.uuid4().hex,
            # word timestamps, on the answer's clock: the output pipeline stretches by `pipeline_speed`
            timeline=Timeline(scale=1.0 / pipeline_speed) if granularities else None,
        )
        request_id_var.set(request.request_id)  # every log line this request causes names it
        # The text step prepares the plan's pieces, each checked once by the back end, off the event loop.
        with tracing.span("text_frontend"):
            request = await anyio.to_thread.run_sync(self.text.checked, self.backend, request)
        cache_status, cache_key = self.cache.assign(
            request,
            body.seed,
            self.backend,
            self.text.lexicon,
            adhoc=reference is not None,
            bypass=no_cache or not body.cache,
            voice_print=lambda: voice.voice_prompt_hash if voice is not None else None,
        )
        plan = SpeechPlan(
            request,
            fmt,
            out_rate,
            pipeline_speed,
            stream,
            pitch=body.pitch,
            granularities=granularities,
            cache_key=cache_key,
            client_seed=body.seed,
        )
        return SpeechJob(plan, received_at=accepted_at, cache_status=cache_status)

    def _format(self, body: SpeechRequest) -> tuple[formats.AudioFormat, int]:
        """The audio format and rate `body` is answered in; 400 `unsupported_format` when it cannot be."""
        if body.subtitles and body.stream_format == "sse":
            raise APIError(
                400,
                f"response_format {body.response_format!r} is subtitles, a whole file: it cannot be sent as "
                "SSE (ask for timestamp_granularities with an audio response_format instead)",
                param="response_format",
                code="unsupported_format",
            )
        try:
            rate = default_rate(self.settings, self.backend.info)
            # subtitles carry no audio: it is made (and cached) as PCM, the cheapest to encode
            audio_format = "pcm" if body.subtitles else body.response_format
            return formats.resolve(audio_format, body.sample_rate, rate)
        except UnsupportedFormat as exc:
            raise APIError(400, exc.message, param=exc.param, code="unsupported_format") from exc

    def _adapter(self, body: SpeechRequest, voice: ResolvedVoice | None) -> AdapterInfo | None:
        """The LoRA adapter a request speaks with: its `lora` field, else its voice's (a voice that is an
        adapter); 400 for a name no adapter has."""
        name = body.lora if body.lora is not None else voice.lora if voice is not None else None
        if name is None:
            return None
        adapter = self.backend.adapters().get(name)
        if adapter is None:
            raise APIError(
                400,
                f"unknown LoRA adapter {name!r}; GET /v1/audio/voices lists the adapters (source 'adapter')",
                param="lora",
                code="adapter_not_found",
            )
        return adapter

    async def lookup(self, job: SpeechJob) -> None:
        """Look the job up in the cache (off the event loop); a hit makes it HIT and holds the audio."""
        await self.cache.lookup(job)
        self._log_request(job)

    def _log_request(self, job: SpeechJob) -> None:
        """One line per speech request: the text only as length and hash unless `log_request_text`; its
        voice, format and cache outcome are also on the request's access line."""
        plan = job.plan
        access_log.note_speech(plan.request.voice, plan.fmt.name, plan.stream, job.cache_status)
        if not log.isEnabledFor(logging.INFO):
            return
        text = plan.request.text
        shown = repr(text) if self.settings.log_request_text else f"sha256:{_digest(text)}"
        log.info(
            "speech %s: %d chars %s voice=%s format=%s stream=%s cache=%s",
            plan.request.request_id,
            len(text),
            shown,
            plan.request.voice,
            plan.fmt.name,
            plan.stream,
            job.cache_status,
        )

    async def admit(self, job: SpeechJob, request: Request | None = None) -> None:
        """Take an admission slot, waiting in line until the request's deadline: the one door to the
        back end for HTTP and WebSocket requests alike. 429 when the line is full; ClientGone when the
        HTTP client of `request` disconnects while it waits (a WebSocket session cancels its own).

        Cache hits need no slot: they never reach the back end."""
        if job.cached is not None:
            return
        remaining = job.received_at + self.settings.request_timeout_s - time.perf_counter()
        tenant = caller_of(request).name if request is not None else ""  # the queue is fair across keys
        waiting = asyncio.wait_for(self.admission.acquire(tenant), max(0.0, remaining))
        try:
            with tracing.span("queue_wait"):
                await (waiting if request is None else until_disconnect(request, waiting))
        except TimeoutError as exc:  # waited in the queue past the request's deadline
            raise DeadlineExceeded(self.settings.request_timeout_s) from exc
        except Overloaded as exc:
            raise APIError(
                429, str(exc), code="rate_limit_exceeded", headers={"Retry-After": str(exc.retry_after_s)}
            ) from exc
        job.admitted = True

    def release(self, job: SpeechJob) -> None:
        if job.admitted:
            job.admitted = False
            self.admission.release()
            self.admission.observe_latency(time.perf_counter() - job.received_at)

    async def audio(self, job: SpeechJob) -> AsyncGenerator[bytes, None]:
        """The encoded response, piece by piece as the back end makes audio (a job not streamed: one
        complete file at the end). However it ends, closing it included, the back end's request is
        cancelled and the encoder released at once.

        Raises DeadlineExceeded once the request has run `settings.request_timeout_s`."""
        plan = job.plan
        deadline = job.received_at + self.settings.request_timeout_s
        in_rate = job.cached.sample_rate if job.cached is not None else self.backend.info.sample_rate
        pipeline = await self.encode_pool.run(
            functools.partial(OutputPipeline, whole=not plan.stream, pitch=plan.pitch),
            in_rate,
            plan.out_rate,
            plan.fmt,
            plan.pipeline_speed,
        )
        timeline = plan.timeline
        if timeline is not None:
            timeline.clear()  # a run again starts from nothing
            if job.cached is not None:  # a hit's timings are all known at once
                timeline.extend(job.cached.pieces or ())
                timeline.complete = True
        chunks: AudioStream
        if job.cached is not None:
            chunks = cached_chunks(job.cached)
        else:
            chunks = self.text.generate(self.backend, plan.request)
            self.metrics.input_chars.inc(len(plan.request.text))
        keep: list[np.ndarray] | None = [] if job.cache_status == "MISS" else None
        spans = tracing.AudioSpans(from_engine=job.cached is None)  # otel_traces
        first = True
        waited = 0.0  # for the back end's audio (metrics_compat's inference time)
        try:
            while True:
                asked = time.perf_counter()
                try:
                    async with asyncio.timeout(deadline - asked):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    spans.engine_finished()
                    if timeline is not None:
                        timeline.complete = True
                    break
                except TimeoutError as exc:
                    raise DeadlineExceeded(self.settings.request_timeout_s) from exc
                finally:
                    waited += time.perf_counter() - asked
                samples = np.asarray(chunk, dtype=np.float32).reshape(-1)
                seconds = samples.size / in_rate / plan.pipeline_speed
                job.audio_seconds += seconds
                if keep is not None:
                    keep.append(samples)
                if job.cached is None:
                    self.metrics.audio_seconds.inc(seconds)
                data = await spans.encoding(self.encode_pool.run(pipeline.push, samples))
                if data:
                    if first:
                        first = False
                        self._observe_ttfa(job)
                    yield data
            if keep is not None:
                await self.cache.put(job, keep, in_rate)
            tail = await spans.encoding(self.encode_pool.run(pipeline.finish))
            if tail:
                if first:
                    self._observe_ttfa(job)
                yield tail
            engine_s = None if job.cached is not None else waited
            self.metrics.synthesis_done(plan.fmt.name, job.route, job.cache_status, engine_s)
        finally:
            # Not left to the garbage collector: a cut stream's frame can sit in a reference cycle (its
            # cancellation's traceback) until a full collection, holding the encoder and the audio kept
            # for the cache.
            spans.end()
            self.encode_pool.release(pipeline.close)
            if keep is not None:
                keep.clear()
            await chunks.aclose()

    def _observe_ttfa(self, job: SpeechJob) -> None:
        seconds = time.perf_counter() - job.received_at
        self.metrics.ttfa.labels(stream=str(job.plan.stream).lower()).observe(seconds)
        access_log.note_first_audio(seconds)

    async def opening(self, job: SpeechJob) -> tuple[bytes, AsyncGenerator[bytes, None]]:
        """The job's first encoded bytes (a job not streamed: its whole file) and `audio` for the rest;
        b"" and a spent generator when it made none.

        Until its first bytes nothing of the answer has reached its client, so one whose audio the
        back end lost part of before then is run again from its start, within its deadline and with its
        seed (fixed as it was prepared), so it is the same answer (`rerun.opened` decides)."""

        def again(loss: AudioLost) -> None:
            log.warning("speech %s run again from its start: %s", job.plan.request.request_id, loss)
            self.metrics.answers_run_again.inc()
            job.audio_seconds = 0.0

        first, rest = await opened(lambda: self.audio(job), again)
        return first or b"", rest

    async def whole(self, job: SpeechJob) -> bytes:
        """The complete file of a job not streamed: its header made exact by the muxer once the audio
        is all there (FLAC STREAMINFO, MP3 Xing, WAV sizes), as a file reader expects. None of it
        reaches the client before the end, so `opening` runs it again whenever the back end lost it."""
        first, pieces = await self.opening(job)
        async with contextlib.aclosing(pieces):
            return first + b"".join([piece async for piece in pieces])


def _check_lengths(limit: int, **fields: str | None) -> None:
    """Each text field within `limit` characters; over it, a 400 naming the field (as OpenAI answers
    an over-long `input`)."""
    for param, value in fields.items():
        if value is not None and len(value) > limit:
            raise APIError(
                400,
                f"{param} is {len(value)} characters; the limit is {limit}",
                param=param,
                code=f"{param}_too_long",
            )


def _retrieve(task: asyncio.Future) -> None:
    """The outcome of work no request waits for any more (a voice freeze past its request's deadline)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("work that outlived its request's deadline failed: %s: %s", type(exc).__name__, exc)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
