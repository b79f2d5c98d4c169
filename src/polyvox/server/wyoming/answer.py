"""`Answer`: one Wyoming answer's sentences spoken in order, as 16-bit PCM bytes as soon as they are
made; while one is sent, the next `piece_lookahead` are already generating (as a WebSocket session's
segments are), and `cancel` stops every generation at once. `close` also lets go of what the answer
holds (its key's stream)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field

from polyvox.server.errors import APIError

_DONE = object()
MAX_QUEUED_SENTENCES = 512  # sentences waiting to be spoken in one answer; past it, text is refused


@dataclass
class _Sentence:
    text: str
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    task: asyncio.Task | None = None


@dataclass(frozen=True)
class _Failure:
    error: Exception


class Answer:
    def __init__(
        self,
        speak: Callable[[str], AsyncGenerator[bytes, None]],
        rate: int,
        ahead: int,
        release: Callable[[], Awaitable[None]] | None = None,
    ):
        """`speak`: one sentence's PCM at `rate` Hz, piece by piece; `ahead`: sentences generated at once;
        `release`: what `close` calls once."""
        self.speak = speak
        self.release = release
        self.rate = rate
        self.ahead = ahead
        self.pending: deque[_Sentence] = deque()  # not started
        self.active: deque[_Sentence] = deque()  # started; the first is the one being sent
        self.wakeup = asyncio.Event()
        self.ended = asyncio.Event()  # no more text comes
        self.cancelled = False

    def add(self, text: str) -> None:
        if self.cancelled:
            return  # an answer that failed takes no more text
        if len(self.pending) >= MAX_QUEUED_SENTENCES:
            raise APIError(
                400,
                f"more than {MAX_QUEUED_SENTENCES} sentences wait to be spoken; send less text at once",
                code="too_much_text_queued",
            )
        self.pending.append(_Sentence(text))
        self._fill()
        self.wakeup.set()

    def end(self) -> None:
        self.ended.set()
        self.wakeup.set()

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """Every sentence's audio, in order; raises the first sentence's failure."""
        while True:
            self._fill()
            if not self.active:
                if self.ended.is_set():
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            sentence = self.active[0]
            while (item := await sentence.queue.get()) is not _DONE:
                if isinstance(item, _Failure):
                    raise item.error
                yield item
            self.active.popleft()

    async def cancel(self) -> None:
        """Stop every sentence's generation and wait until they have let go."""
        self.cancelled = True
        tasks = [sentence.task for sentence in self.active if sentence.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.active.clear()
        self.pending.clear()

    async def close(self) -> None:
        await self.cancel()
        release, self.release = self.release, None
        if release is not None:
            await release()

    def _fill(self) -> None:
        while self.pending and len(self.active) < self.ahead:
            sentence = self.pending.popleft()
            sentence.task = asyncio.create_task(self._produce(sentence))
            self.active.append(sentence)

    async def _produce(self, sentence: _Sentence) -> None:
        try:
            async with contextlib.aclosing(self.speak(sentence.text)) as pieces:
                async for piece in pieces:
                    sentence.queue.put_nowait(piece)
        except Exception as exc:
            sentence.queue.put_nowait(_Failure(exc))
            return
        sentence.queue.put_nowait(_DONE)
