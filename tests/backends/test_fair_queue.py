"""FairQueue: the order in which sentences of several listeners reach the workers.

The work here is cheap (it returns silence of a chosen length, which the queue credits to the
listener as audio made); the order is what the workers actually ran. A gate sentence holds the
workers while a test queues everything, so every choice is made with the whole queue in view.
The same queue under the real piper voice is tested in test_fair_embedded.py.
"""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from polyvox.backends.errors import BackendError
from polyvox.backends.fair_queue import FairQueue, Listener, Place

RATE = 1000  # samples per second of the silence the work returns


class Scenario:
    """A queue, the labels of the sentences in the order they started, and gates that hold workers."""

    def __init__(self, workers: int = 1):
        self.queue = FairQueue(workers, RATE)
        self.started: list[str] = []
        self._lock = threading.Lock()
        self._together = 0  # how many of the next sentences to start wait until all of them run
        self._barrier: threading.Barrier | None = None

    def say(self, place: Place, label: str, seconds: float = 1.0, sentence: int = 0) -> asyncio.Task:
        """Queue a sentence that records `label` when it starts and makes `seconds` of audio."""

        def work() -> np.ndarray:
            with self._lock:
                self.started.append(label)
                barrier = self._barrier if self._together > 0 else None
                self._together -= barrier is not None
            if barrier is not None:
                barrier.wait(timeout=30)
            return np.zeros(round(seconds * RATE), dtype=np.float32)

        return asyncio.ensure_future(self.queue.run(place, work, sentence=sentence))

    def start_together(self, count: int) -> None:
        """The next `count` sentences to start run side by side, as slow sentences would."""
        self._barrier, self._together = threading.Barrier(count), count

    async def hold_workers(self) -> threading.Event:
        """Occupy every worker until the returned event is set."""
        release = threading.Event()
        entered = threading.Semaphore(0)

        def wait() -> np.ndarray:
            entered.release()
            release.wait(timeout=30)
            return np.zeros(0, dtype=np.float32)

        for _ in range(self.queue.workers):
            asyncio.ensure_future(self.queue.run(Place(Listener()), wait))
        for _ in range(self.queue.workers):
            await asyncio.to_thread(entered.acquire)
        return release


def run(scenario) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_every_listener_hears_its_first_sentence_before_anyone_gets_a_second():
    async def scenario():
        s = Scenario()
        release = await s.hold_workers()
        listeners = {name: Place(Listener()) for name in "ABC"}
        tasks = []
        for name, place in listeners.items():  # each hands over two sentences at once, as a lookahead does
            tasks += [s.say(place, f"{name}0", sentence=0), s.say(place, f"{name}1", sentence=1)]
        release.set()
        await asyncio.gather(*tasks)
        assert s.started == ["A0", "B0", "C0", "A1", "B1", "C1"]

    run(scenario)


def test_a_stream_far_ahead_of_playback_lets_one_about_to_run_dry_go_first():
    async def scenario():
        s = Scenario()
        ahead, behind = Place(Listener()), Place(Listener())
        await asyncio.gather(s.say(ahead, "ahead0", seconds=30.0), s.say(behind, "behind0", seconds=1.0))
        release = await s.hold_workers()
        tasks = [s.say(ahead, "ahead1", sentence=1), s.say(behind, "behind1", sentence=1)]
        release.set()
        await asyncio.gather(*tasks)
        assert s.started == ["ahead0", "behind0", "behind1", "ahead1"]

    run(scenario)


def test_a_newcomer_goes_before_a_playing_listener_with_audio_to_spare():
    async def scenario():
        s = Scenario()
        playing = Place(Listener())
        await s.say(playing, "playing0", seconds=30.0)
        release = await s.hold_workers()
        tasks = [s.say(playing, "playing1", sentence=1), s.say(Place(Listener()), "newcomer0")]
        release.set()
        await asyncio.gather(*tasks)
        assert s.started == ["playing0", "newcomer0", "playing1"]

    run(scenario)


def test_a_playing_listener_about_to_run_dry_goes_before_a_newcomer():
    async def scenario():
        s = Scenario()
        playing = Place(Listener())
        await s.say(playing, "playing0", seconds=0.05)  # runs dry 50 ms after its first audio
        release = await s.hold_workers()
        tasks = [s.say(playing, "playing1", sentence=1), s.say(Place(Listener()), "newcomer0")]
        release.set()
        await asyncio.gather(*tasks)
        assert s.started == ["playing0", "playing1", "newcomer0"]

    run(scenario)


def test_a_listeners_sentences_start_in_the_order_of_its_request():
    async def scenario():
        s = Scenario()
        release = await s.hold_workers()
        listener = Listener()
        # A piece split into two sentences, its second queued after the next piece's first.
        tasks = [
            s.say(Place(listener, piece=0), "piece0.0", sentence=0),
            s.say(Place(listener, piece=1), "piece1.0", sentence=0),
            s.say(Place(listener, piece=0), "piece0.1", sentence=1),
        ]
        release.set()
        await asyncio.gather(*tasks)
        assert s.started == ["piece0.0", "piece0.1", "piece1.0"]

    run(scenario)


def test_a_free_worker_serves_another_listener_before_a_second_sentence_of_the_same_one():
    async def scenario():
        s = Scenario(workers=2)
        soon, later = Place(Listener()), Place(Listener())
        await s.say(soon, "soon0", seconds=1.0)
        await s.say(later, "later0", seconds=5.0)
        release = await s.hold_workers()
        s.start_together(2)
        tasks = [
            s.say(soon, "soon1", sentence=1),
            s.say(soon, "soon2", sentence=2),
            s.say(later, "later1", sentence=1),
        ]
        release.set()
        await asyncio.gather(*tasks)
        # Both workers start at once (their relative order is a race); the same listener's next waits.
        assert set(s.started[2:4]) == {"soon1", "later1"}
        assert s.started[4] == "soon2"

    run(scenario)


def test_a_sentence_whose_caller_went_away_leaves_the_queue_and_never_runs():
    async def scenario():
        s = Scenario()
        release = await s.hold_workers()
        gone, staying = Place(Listener()), Place(Listener())
        dropped = [s.say(gone, "gone0"), s.say(gone, "gone1", sentence=1)]
        kept = s.say(staying, "staying0")
        await asyncio.sleep(0)
        assert s.queue.waiting == 3
        for task in dropped:
            task.cancel()
        await asyncio.gather(*dropped, return_exceptions=True)
        await asyncio.sleep(0)  # the queue hears of the cancellation on the loop's next turn
        assert s.queue.waiting == 1
        release.set()
        await kept
        assert s.started == ["staying0"]

    run(scenario)


def test_closing_fails_the_waiting_sentences():
    async def scenario():
        s = Scenario()
        release = await s.hold_workers()
        waiting = s.say(Place(Listener()), "never")
        await asyncio.sleep(0)
        s.queue.close()
        release.set()
        with pytest.raises(BackendError, match="stopped"):
            await waiting
        with pytest.raises(BackendError, match="stopped"):
            await s.queue.run(Place(Listener()), lambda: np.zeros(1, dtype=np.float32))
        assert s.started == []

    run(scenario)
