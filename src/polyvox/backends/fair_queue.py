"""Fair scheduling of sentences from many listeners onto a few CPU workers.

A *listener* is one request being spoken; it hands its sentences to the queue one or two at a time.
A listener *runs dry* when someone playing its audio in real time from its first audio would have
heard everything made for it so far. Whenever a worker is free it takes, from everything waiting:

1. the first sentence of a listener that has had none started yet, oldest listener first, so every
   waiting request starts to hear something before anyone gets a second sentence; unless some
   playing listener's next sentence would then be made too late, after it runs dry (where the CPU
   cannot keep every stream ahead of playback, the streams already playing come first and new
   requests wait for their first audio);
2. otherwise the next sentence of the listener with the fewest sentences running, then the one
   that runs dry first. With sentences of equal length this is round-robin; a stream far ahead of
   playback lets one about to run dry go first.

How long a sentence will take is estimated from its size (characters) and the seconds per
character the workers took lately. A listener's own sentences start in their order within the
request (piece, then sentence). A sentence whose caller stopped waiting (the client went away)
leaves the queue at once and never runs. Which listener and piece a generation belongs to comes with
its request (`SynthesisRequest.listener` and `.piece`, set by the text pipeline).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from polyvox.backends.errors import BackendError


class Listener:
    """One request's standing in the queue. Only the queue changes it, under its lock."""

    def __init__(self) -> None:
        self.order: int | None = None  # when its first sentence was queued, relative to other listeners
        self.started = 0
        self.running = 0
        self.first_audio_at: float | None = None
        self.audio_s = 0.0

    @property
    def playing_idle(self) -> bool:
        """It has had audio, and none of its sentences is being made."""
        return self.first_audio_at is not None and not self.running

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


# Time a sentence's audio takes from the worker to the listener's ears (encoding, the event loop
# under a busy CPU, the network), kept in hand when judging whether a playing listener can wait.
_DELIVERY_S = 0.3


@dataclass(eq=False)
class _Sentence:
    listener: Listener
    work: Callable[[], np.ndarray]
    order: tuple[int, int]  # (piece, sentence) within the listener's request
    size: float  # what its synthesis time is proportional to (characters)
    seq: int
    future: Future = field(default_factory=Future)


class FairQueue:
    """`workers` threads that run sentence syntheses in the fair order of the module docstring.

    A sentence's work returns mono float32 audio at `sample_rate`; its length is credited to the
    listener. Awaiting `run` from several event loops is fine: results travel as futures."""

    def __init__(
        self,
        workers: int,
        sample_rate: int,
        thread_name_prefix: str = "polyvox-fair",
        clock: Callable[[], float] = time.monotonic,
    ):
        """`clock`: the seconds that listeners' playback and the workers' speed are measured in."""
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.sample_rate = sample_rate
        self.clock = clock
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=thread_name_prefix)
        self._lock = threading.Lock()
        self._waiting: list[_Sentence] = []
        self._seq = itertools.count()
        self._closed = False
        self._seconds_per_size: float | None = None  # recent synthesis time per unit of size

    @property
    def waiting(self) -> int:
        """Sentences queued and not started."""
        with self._lock:
            return len(self._waiting)

    async def run(
        self, place: Place, work: Callable[[], np.ndarray], sentence: int = 0, size: float = 0.0
    ) -> np.ndarray:
        """The audio `work` makes, once the queue's order reaches it; `sentence` is its index in the
        piece, `size` what its synthesis time grows with (characters; 0: unknown). Cancelling the
        caller drops a sentence that has not started."""
        with self._lock:
            if self._closed:
                raise BackendError("The embedded engine stopped before the utterance was finished.")
            listener = place.listener
            seq = next(self._seq)
            if listener.order is None:
                listener.order = seq
            queued = _Sentence(listener, work, (place.piece, sentence), size, seq)
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
                    BackendError("The embedded engine stopped before the utterance was finished.")
                )
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _forget_if_cancelled(self, future: Future) -> None:
        if not future.cancelled():
            return
        with self._lock:
            self._waiting = [queued for queued in self._waiting if queued.future is not future]

    def _take(self) -> _Sentence | None:
        with self._lock:
            while self._waiting:
                best = self._choose(self.clock())
                self._waiting.remove(best)
                if best.future.set_running_or_notify_cancel():
                    best.listener.started += 1
                    best.listener.running += 1
                    return best
        return None

    def _choose(self, now: float) -> _Sentence:
        """The sentence to start now (see the module docstring); call with the lock held."""
        heads: dict[Listener, _Sentence] = {}  # each listener's next sentence in its request's order
        for queued in self._waiting:
            head = heads.get(queued.listener)
            if head is None or (queued.order, queued.seq) < (head.order, head.seq):
                heads[queued.listener] = queued
        newcomers = [head for head in heads.values() if head.listener.started == 0]
        if newcomers:
            first = min(newcomers, key=lambda head: head.listener.order or 0)  # set once queued
            if self._playing_can_wait_for(first, heads.values(), now):
                return first
        return min(
            heads.values(),
            key=lambda head: (
                head.listener.started == 0,
                head.listener.running,
                head.listener.runs_dry_at(now),
                head.listener.order,
            ),
        )

    def _playing_can_wait_for(self, first: _Sentence, heads: Iterable[_Sentence], now: float) -> bool:
        """Whether every playing listener's next sentence is still made before it runs dry if `first`
        goes before them all (the rest in the order they run dry, the work spread over the workers).
        A listener with a sentence running is not counted: that sentence adds to its audio first."""
        playing = sorted(
            (head for head in heads if head.listener.playing_idle),
            key=lambda head: head.listener.runs_dry_at(now),
        )
        work = self._estimate(first)
        for head in playing:
            work += self._estimate(head)
            if now + work / self.workers + _DELIVERY_S > head.listener.runs_dry_at(now):
                return False
        return True

    def _estimate(self, queued: _Sentence) -> float:
        return (self._seconds_per_size or 0.0) * queued.size

    def _run_next(self) -> None:
        queued = self._take()
        if queued is None:
            return
        began = self.clock()
        try:
            audio = queued.work()
        except BaseException as exc:
            self._credit(queued, 0.0, began)
            queued.future.set_exception(exc)
            return
        self._credit(queued, len(audio) / self.sample_rate, began)
        queued.future.set_result(audio)

    def _credit(self, queued: _Sentence, seconds: float, began: float) -> None:
        now = self.clock()
        with self._lock:
            listener = queued.listener
            listener.running -= 1
            if seconds > 0 and listener.first_audio_at is None:
                listener.first_audio_at = now
            listener.audio_s += seconds
            if queued.size > 0 and seconds > 0:
                rate = (now - began) / queued.size
                previous = self._seconds_per_size
                self._seconds_per_size = rate if previous is None else 0.8 * previous + 0.2 * rate
