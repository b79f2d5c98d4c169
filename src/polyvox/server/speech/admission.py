"""Admission control: at most `max_running` syntheses at once, at most `max_waiting` queued behind
them (first come, first served); anything past that is refused at once with `Overloaded` (a 429)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class Overloaded(Exception):
    """Both the running set and the queue are full."""

    def __init__(self, retry_after_s: int):
        super().__init__(f"server busy: try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Admission:
    """Slots for running syntheses plus a bounded FIFO queue. Call `acquire()` then `release()` once.

    `on_change(running, waiting)` is called whenever either count changes (metrics).
    """

    def __init__(
        self,
        max_running: int,
        max_waiting: int,
        on_change: Callable[[int, int], None] | None = None,
    ):
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._on_change = on_change
        self._mean_latency_s = 1.0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def retry_after_s(self) -> int:
        """A hint for `Retry-After`: how long until a queue place is likely free."""
        backlog = (self.running + self.waiting) / max(1, self.max_running)
        return max(1, round(backlog * self._mean_latency_s))

    def observe_latency(self, seconds: float) -> None:
        """Feed a finished request's duration into the `Retry-After` estimate."""
        self._mean_latency_s = 0.9 * self._mean_latency_s + 0.1 * seconds

    async def acquire(self) -> None:
        """Take a running slot, waiting in line if needed; raises `Overloaded` when the line is full."""
        if self.running < self.max_running and not self._waiters:
            self.running += 1
            self._changed()
            return
        if len(self._waiters) >= self.max_waiting:
            raise Overloaded(self.retry_after_s())
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._changed()
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
                self._changed()
            raise

    def release(self) -> None:
        """Give a running slot back, handing it straight to the next waiter if there is one."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._changed()
                return
        self.running -= 1
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.running, self.waiting)
