"""Fair scheduling of sentences from many listeners onto a few CPU workers.

A *listener* is one request being spoken; it hands its sentences to the queue one or two at a time.
Whenever a worker is free it takes, from everything waiting:

1. a sentence of a listener that has had none started yet, oldest listener first, so every waiting
   request starts to hear something before anyone gets a second sentence;
2. otherwise a sentence of the listener with the fewest sentences running, then the one whose audio
   runs out first: its first audio's time plus the seconds of audio made for it so far, which is
   when someone playing it in real time would run dry ("now" for a listener still waiting for its
   first audio). With sentences of equal length this is round-robin; a stream far ahead of playback
   lets one about to run dry go first.

A listener's own sentences start in their order within the request (piece, then sentence). A
sentence whose caller stopped waiting (the client went away) leaves the queue at once and never
runs. The pipeline marks which listener and piece a generation belongs to with `listening`, which
engines read back with `place_here`.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from polyvox.engines.errors import EngineError


class Listener:
    """One request's standing in the queue. Only the queue changes it, under its lock."""

    def __init__(self) -> None:
        self.order: int | None = None  # when its first sentence was queued, relative to other listeners
        self.started = 0
        self.running = 0
        self.first_audio_at: float | None = None
        self.audio_s = 0.0

    def runs_dry_at(self, now: float) -> float:
        """When a real-time player of everything made so far would run out of audio."""
        if self.first_audio_at is None:
            return now
        return self.first_audio_at + self.audio_s


@dataclass(frozen=True)
class Place:
    """Whose request a generation speaks, and which of its pieces."""

    listener: Listener
    piece: int = 0


_PLACE: contextvars.ContextVar[Place | None] = contextvars.ContextVar("polyvox_place", default=None)


def listening(place: Place) -> contextvars.Context:
    """A copy of the current context in which a generation's engine sees `place` (run tasks in it)."""
    context = contextvars.copy_context()
    context.run(_PLACE.set, place)
    return context


def place_here() -> Place:
    """The place of the generation running now; a fresh listener's first piece when none was marked."""
    return _PLACE.get() or Place(Listener())


@dataclass(eq=False)
class _Sentence:
    listener: Listener
    work: Callable[[], np.ndarray]
    order: tuple[int, int]  # (piece, sentence) within the listener's request
    seq: int
    future: Future = field(default_factory=Future)

    def rank(self, now: float) -> tuple:
        listener = self.listener
        if listener.started == 0:
            return (0, 0, 0.0, listener.order, self.order, self.seq)
        return (1, listener.running, listener.runs_dry_at(now), listener.order, self.order, self.seq)


class FairQueue:
    """`workers` threads that run sentence syntheses in the fair order of the module docstring.

    A sentence's work returns mono float32 audio at `sample_rate`; its length is credited to the
    listener. Awaiting `run` from several event loops is fine: results travel as futures."""

    def __init__(self, workers: int, sample_rate: int, thread_name_prefix: str = "polyvox-fair"):
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.sample_rate = sample_rate
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=thread_name_prefix)
        self._lock = threading.Lock()
        self._waiting: list[_Sentence] = []
        self._seq = itertools.count()
        self._closed = False

    @property
    def waiting(self) -> int:
        """Sentences queued and not started."""
        with self._lock:
            return len(self._waiting)

    async def run(self, place: Place, work: Callable[[], np.ndarray], sentence: int = 0) -> np.ndarray:
        """The audio `work` makes, once the queue's order reaches it. Cancelling the caller drops a
        sentence that has not started."""
        with self._lock:
            if self._closed:
                raise EngineError("The embedded engine stopped before the utterance was finished.")
            listener = place.listener
            seq = next(self._seq)
            if listener.order is None:
                listener.order = seq
            queued = _Sentence(listener, work, (place.piece, sentence), seq)
            self._waiting.append(queued)
            # One pick per sentence: whichever sentence ranks first when a worker is free runs then.
            self._pool.submit(self._run_next)
        queued.future.add_done_callback(self._forget_if_cancelled)
        return await asyncio.wrap_future(queued.future)

    def close(self) -> None:
        """Fail every waiting sentence and let the workers end after the ones running."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
        for queued in waiting:
            if queued.future.set_running_or_notify_cancel():
                queued.future.set_exception(
                    EngineError("The embedded engine stopped before the utterance was finished.")
                )
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _forget_if_cancelled(self, future: Future) -> None:
        if not future.cancelled():
            return
        with self._lock:
            self._waiting = [queued for queued in self._waiting if queued.future is not future]

    def _take(self) -> _Sentence | None:
        with self._lock:
            now = time.monotonic()
            while self._waiting:
                best = min(self._waiting, key=lambda queued: queued.rank(now))
                self._waiting.remove(best)
                if best.future.set_running_or_notify_cancel():
                    best.listener.started += 1
                    best.listener.running += 1
                    return best
        return None

    def _run_next(self) -> None:
        queued = self._take()
        if queued is None:
            return
        try:
            audio = queued.work()
        except BaseException as exc:
            self._credit(queued.listener, 0.0)
            queued.future.set_exception(exc)
            return
        self._credit(queued.listener, len(audio) / self.sample_rate)
        queued.future.set_result(audio)

    def _credit(self, listener: Listener, seconds: float) -> None:
        with self._lock:
            listener.running -= 1
            if seconds > 0 and listener.first_audio_at is None:
                listener.first_audio_at = time.monotonic()
            listener.audio_s += seconds
