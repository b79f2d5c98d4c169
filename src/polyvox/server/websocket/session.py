"""One `/v1/audio/speech/ws` session's state machine: configuration, the sentence buffer, segments
queued and generating (`settings.piece_lookahead` ahead of the one streaming), their audio sent in
order, and `cancel` / disconnect stopping everything at once."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from fastapi import WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from polyvox.backends.base import ReferenceAudio
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.server.errors import APIError, DeadlineExceeded, from_validation_errors
from polyvox.server.protocol import SpeechRequest, SpeechUsage, first_lone_surrogate
from polyvox.server.served_models import check_model
from polyvox.server.speech.parsing import base64_reference
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.websocket.protocol import (
    ProtocolError,
    SessionConfig,
    as_api_error,
    encode_frame,
    error_frame,
    parse_message,
)
from polyvox.server.websocket.segments import DONE, Failure, Segment, produce
from polyvox.server.websocket.sentences import SentenceBuffer
from polyvox.server.websocket.words import new_pieces, words_event
from polyvox.voices.clips import ClipLimits, clip_rate
from polyvox.voices.errors import VoiceError

log = logging.getLogger(__name__)

MAX_QUEUED_SEGMENTS = 512  # sentences waiting to be spoken in one session; past it, text is refused


class SpeechSession:
    """One WebSocket session: reads client messages, runs segments, sends their audio in order."""

    def __init__(
        self, websocket: WebSocket, service: SpeechService, tenancy: Tenancy, subprotocol: str | None = None
    ):
        self.websocket = websocket
        self.subprotocol = subprotocol  # the one answered to the handshake
        self.service = service
        self.tenancy = tenancy
        self.config: SessionConfig | None = None
        self.template: SpeechRequest | None = None
        self.reference: ReferenceAudio | None = None
        self.buffer = SentenceBuffer(service.settings.max_piece_chars)
        self.pending: deque[Segment] = deque()  # not started
        self.active: deque[Segment] = deque()  # started; the first is the one streaming
        self.ahead = 1 + service.settings.piece_lookahead
        self.wakeup = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.sender: asyncio.Task | None = None
        self.segments = 0
        self.clock = 0.0  # seconds of the session's audio before the segment being sent (segment.words)
        self.ending = False
        self.input_tokens = 0
        self.output_tokens = 0

    async def run(self) -> None:
        await self.websocket.accept(subprotocol=self.subprotocol)
        self.sender = asyncio.create_task(self._send_loop())
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                try:
                    await self._handle(message)
                except ProtocolError as exc:
                    await self._send_error(exc.error)
                except (BackendInputError, BackendError, VoiceError) as exc:
                    await self._send_error(as_api_error(exc))
                if self.sender.done():
                    return
        finally:
            await self._stop_audio()

    # ------------------------------------------------------------------ client messages

    async def _handle(self, message: Mapping[str, Any]) -> None:
        kind, data = parse_message(message)
        if kind == "config":
            await self._configure(data)
            return
        if self.config is None:
            raise ProtocolError('the first message must be {"type": "config", ...}', code="config_required")
        if self.ending:
            raise ProtocolError("the session has ended its input; open a new one", code="session_ended")
        if kind == "text":
            text = data.get("text")
            if not isinstance(text, str):
                raise ProtocolError("a text message needs a string `text`", param="text")
            if (at := first_lone_surrogate(text)) is not None:
                reason = f"text: contains a lone UTF-16 surrogate at character {at}, which is not text"
                raise ProtocolError(reason, param="text")
            for sentence in self.buffer.push(text):
                self._queue(sentence)
        elif kind == "flush":
            self._flush()
        elif kind == "cancel":
            await self._cancel()
        elif kind == "end":
            self._flush()
            self.ending = True
            self.wakeup.set()
        else:
            raise ProtocolError(f"unknown message type {kind!r}", param="type")

    async def _configure(self, data: dict[str, Any]) -> None:
        if self.config is not None:
            raise ProtocolError("the session is already configured", code="already_configured")
        try:
            config = SessionConfig.model_validate(data)
            fields = config.model_dump(exclude={"type", "audio_encoding", "ref_audio"}, exclude_none=True)
            template = SpeechRequest.model_validate({**fields, "input": "Hello."})
            check_model(template.model, self.service.backend, self.service.settings.accept_any_model)
            reference = None
            if config.ref_audio is not None:
                limits = ClipLimits.from_settings(self.service.settings)
                rate = clip_rate(self.service.backend.info)
                reference = await base64_reference(config.ref_audio, config.ref_text, limits, rate)
            # another key's private voice: unknown
            caller = caller_of(self.websocket)
            voice = None if reference is not None else await self.service.voice(template.voice, caller)
            # Whether the voice, format and back end can serve the session at all:
            with self.service.accept() as accepted_at:
                probe = await self.service.prepare(
                    template, voice, stream=True, accepted_at=accepted_at, reference=reference
                )
        except ValidationError as exc:
            raise ProtocolError.of(from_validation_errors(exc.errors())) from exc
        except (APIError, VoiceError, DeadlineExceeded) as exc:
            raise ProtocolError.of(as_api_error(exc)) from exc
        self.config, self.template, self.reference = config, template, reference
        await self._send_json(
            {
                "type": "ready",
                "response_format": config.response_format,
                "sample_rate": probe.plan.out_rate,
                "content_type": probe.plan.content_type,
                "audio_encoding": config.audio_encoding,
            }
        )

    def _flush(self) -> None:
        if (text := self.buffer.flush()) is not None:
            self._queue(text)

    def _queue(self, text: str) -> None:
        if len(self.pending) >= MAX_QUEUED_SEGMENTS:
            raise ProtocolError(
                f"more than {MAX_QUEUED_SEGMENTS} sentences are waiting to be spoken; send less text at once",
                code="too_much_text_queued",
            )
        self.pending.append(Segment(self.segments, text))
        self.segments += 1
        self._fill()
        self.wakeup.set()

    async def _cancel(self) -> None:
        """Stop all audio now: nothing of what was queued is sent after the `cancelled` message."""
        dropped = [segment.index for segment in (*self.active, *self.pending)]
        self.buffer.clear()
        await self._stop_audio()
        self.clock = 0.0
        await self._send_json({"type": "cancelled", "segments": dropped})
        self.sender = asyncio.create_task(self._send_loop())

    async def _stop_audio(self) -> None:
        """Cancel the sender and every segment's generation, and wait until they have let go."""
        if self.sender is not None:
            async with self.send_lock:  # never interrupt a frame half-sent
                self.sender.cancel()
                outcome: BaseException | None
                (outcome,) = await asyncio.gather(self.sender, return_exceptions=True)
            if isinstance(outcome, Exception) and not isinstance(outcome, WebSocketDisconnect | OSError):
                log.error("speech session sender failed", exc_info=outcome)
        tasks = [segment.task for segment in self.active if segment.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.active.clear()
        self.pending.clear()

    # ------------------------------------------------------------------ audio out

    def _fill(self) -> None:
        """Start the next segments' generation while fewer than `ahead` are running."""
        while self.pending and len(self.active) < self.ahead:
            segment = self.pending.popleft()
            segment.task = asyncio.create_task(self._produce(segment))
            self.active.append(segment)

    async def _produce(self, segment: Segment) -> None:
        assert self.template is not None  # segments are queued only once the session is configured
        await produce(self.service, self.tenancy, self.websocket, self.template, self.reference, segment)

    async def _send_loop(self) -> None:
        while True:
            self._fill()
            if not self.active:
                if self.ending:
                    await self._finish()
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            segment = self.active[0]
            await self._send_json({"type": "segment.start", "segment": segment.index, "text": segment.text})
            failed = False
            while (item := await segment.queue.get()) is not DONE:
                if isinstance(item, Failure):
                    await self._send_error(as_api_error(item.error), segment=segment.index)
                    failed = True
                    break
                await self._send_words(segment)  # a piece's words before (or with) its audio
                await self._send_audio(segment.index, item)
            self.active.popleft()
            if not failed:
                await self._send_words(segment)
                await self._segment_done(segment)

    async def _send_words(self, segment: Segment) -> None:
        assert self.config is not None  # segments run only once the session is configured
        granularities = self.config.timestamp_granularities or []
        if event := words_event(segment.index, new_pieces(segment.job), self.clock, granularities):
            await self._send_json(event)

    async def _segment_done(self, segment: Segment) -> None:
        job = segment.job
        assert job is not None  # a segment's audio is done only after its job was prepared
        usage = job.usage()
        self.clock += job.audio_seconds  # where the next segment starts on the session's clock
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        await self._send_json(
            {
                "type": "segment.done",
                "segment": segment.index,
                "audio_seconds": round(job.audio_seconds, 6),
                "usage": usage.model_dump(),
            }
        )

    async def _finish(self) -> None:
        usage = SpeechUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.input_tokens + self.output_tokens,
        )
        await self._send_json({"type": "done", "segments": self.segments, "usage": usage.model_dump()})
        async with self.send_lock:
            await self.websocket.close(1000)

    async def _send_audio(self, index: int, data: bytes) -> None:
        assert self.config is not None  # audio is made only once the session is configured
        if self.config.audio_encoding == "base64":
            await self._send_json(
                {"type": "audio", "segment": index, "audio": base64.b64encode(data).decode()}
            )
            return
        async with self.send_lock:
            await self.websocket.send_bytes(data)

    async def _send_json(self, payload: dict[str, Any]) -> None:
        async with self.send_lock:
            await self.websocket.send_text(encode_frame(payload))

    async def _send_error(self, error: APIError, segment: int | None = None) -> None:
        self.service.metrics.errors.labels(type=error.code or error.type).inc()
        await self._send_json(error_frame(error, segment))
