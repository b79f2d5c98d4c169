"""One context of an ElevenLabs text-to-speech socket: its text buffer, its sentences queued and
generating (`settings.piece_lookahead` ahead of the one being sent), its audio sent in order as audio
messages, each sentence's character alignment once its words are known, and `isFinal` once it is closed
and spoken. Contexts on one socket run side by side; `cancel` stops one at once (its back-end requests
are cancelled and their admission slots given back before it returns)."""

from __future__ import annotations

import asyncio
import base64
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import HTTPConnection

from polyvox.server.elevenlabs.alignment import CharacterTimes, character_times
from polyvox.server.elevenlabs.output_format import UlawEncoder
from polyvox.server.elevenlabs.words import answer_words
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.websocket.segments import DONE, Failure, Segment, produce
from polyvox.server.websocket.sentences import SentenceBuffer

Send = Callable[[dict[str, Any]], Awaitable[None]]
OnFailure = Callable[[str | None, BaseException], Awaitable[None]]
MAX_QUEUED_SEGMENTS = 512  # sentences waiting in one context; past it, text is refused


class Context:
    """One context (`context_id`; None on `stream-input`, which has one)."""

    def __init__(
        self,
        context_id: str | None,
        *,
        service: SpeechService,
        tenancy: Tenancy,
        connection: HTTPConnection,
        template: SpeechRequest,
        send: Send,
        on_failure: OnFailure,
        ulaw: bool,
        context_clock: bool,
    ):
        self.id = context_id
        self.service = service
        self.tenancy = tenancy
        self.connection = connection
        self.template = template
        self.send = send
        self.on_failure = on_failure
        self.ulaw = UlawEncoder() if ulaw else None
        # Alignment times: on the context's clock (from its first sample), or each sentence's own (from
        # that sentence's first sample: a client adds up the sentences' lengths, as ElevenLabs' do).
        self.context_clock = context_clock
        self.buffer = SentenceBuffer(service.settings.max_piece_chars)
        self.pending: deque[Segment] = deque()
        self.active: deque[Segment] = deque()
        self.ahead = 1 + service.settings.piece_lookahead
        self.wakeup = asyncio.Event()
        self.segments = 0
        self.closing = False  # no more text: speak what is queued, then `isFinal`
        self.clock = 0.0  # seconds of this context's audio sent
        self.sender = asyncio.create_task(self._send_loop())
        self.finished = asyncio.Event()

    # ------------------------------------------------------------------ text in

    def push(self, text: str) -> None:
        for sentence in self.buffer.push(text):
            self._queue(sentence)

    def flush(self) -> None:
        if (text := self.buffer.flush()) is not None:
            self._queue(text)

    def close(self) -> None:
        """No more text: what was sent is spoken (the buffer too), then `isFinal`."""
        self.flush()
        self.closing = True
        self.wakeup.set()

    def _queue(self, text: str) -> None:
        if len(self.pending) >= MAX_QUEUED_SEGMENTS:
            raise ValueError(f"more than {MAX_QUEUED_SEGMENTS} sentences are waiting in this context")
        self.pending.append(Segment(self.segments, text))
        self.segments += 1
        self._fill()
        self.wakeup.set()

    def _fill(self) -> None:
        while self.pending and len(self.active) < self.ahead:
            segment = self.pending.popleft()
            segment.task = asyncio.create_task(
                produce(self.service, self.tenancy, self.connection, self.template, None, segment)
            )
            self.active.append(segment)

    async def cancel(self) -> None:
        """Stop at once: nothing more of this context is sent, its back-end work is let go."""
        self.buffer.clear()
        self.sender.cancel()
        await asyncio.gather(self.sender, return_exceptions=True)
        tasks = [segment.task for segment in self.active if segment.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.active.clear()
        self.pending.clear()
        self.finished.set()

    # ------------------------------------------------------------------ audio out

    async def _send_loop(self) -> None:
        while True:
            self._fill()
            if not self.active:
                if self.closing:
                    await self.send(self._message(isFinal=True))
                    self.finished.set()
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            segment = self.active[0]
            start = self.clock
            while (item := await segment.queue.get()) is not DONE:
                if isinstance(item, Failure):
                    self.active.popleft()
                    await self.on_failure(self.id, item.error)
                    break
                if self.ulaw is not None:
                    item = self.ulaw.push(item)
                await self.send(self._message(audio=base64.b64encode(item).decode()))
            else:
                self.active.popleft()
                job = segment.job
                seconds = job.audio_seconds if job is not None else 0.0
                self.clock = start + seconds
                times = self._alignment(segment, seconds)
                if times is not None and times.chars:
                    offset = start if self.context_clock else 0.0
                    aligned = times.as_socket(offset)
                    await self.send(self._message(audio="", alignment=aligned, normalizedAlignment=aligned))

    def _alignment(self, segment: Segment, seconds: float) -> CharacterTimes | None:
        """The sentence's characters timed from its first sample (None: its words are not known)."""
        words = answer_words(segment.job)
        if words is None:
            return None
        text = segment.text + " "  # the space before the next sentence: a client's last word ends there
        return character_times(text, words, seconds)

    def _message(self, **fields: Any) -> dict[str, Any]:
        if self.id is not None:
            fields["contextId"] = self.id
        return fields
