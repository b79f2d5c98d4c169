"""Admission control: at most `max_running` syntheses at once, at most `max_waiting` queued behind
them; anything past that is refused at once with `Overloaded` (a 429).

The queue is fair across tenants (API keys, by name): each has its own line, and a free slot goes to
the next tenant in turn (round robin, first come first served within a tenant), so a key with many
requests waiting does not starve a key with one. When the queue is full, a newcomer whose tenant
has fewer waiting than the tenant with the most takes that tenant's newest place (which is refused
instead); otherwise the newcomer is refused."""

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
    """Slots for running syntheses plus a bounded queue per tenant. Call `acquire()` then `release()`
    once.

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
        # tenant → its line; the dict's order is the turn order (a tenant served moves to the end)
        self._lines: dict[str, deque[asyncio.Future[None]]] = {}
        self._waiting = 0
        self._on_change = on_change
        self._mean_latency_s = 1.0

    @property
    def waiting(self) -> int:
        return self._waiting

    def retry_after_s(self) -> int:
        """A hint for `Retry-After`: how long until a queue place is likely free."""
        backlog = (self.running + self.waiting) / max(1, self.max_running)
        return max(1, round(backlog * self._mean_latency_s))

    def observe_latency(self, seconds: float) -> None:
        """Feed a finished request's duration into the `Retry-After` estimate."""
        self._mean_latency_s = 0.9 * self._mean_latency_s + 0.1 * seconds

    async def acquire(self, tenant: str = "") -> None:
        """Take a running slot, waiting in `tenant`'s line if needed; raises `Overloaded` when the
        queue is full and `tenant` has its share of it, or when its place is taken by a fairer one."""
        if self.running < self.max_running and not self._waiting:
            self.running += 1
            self._changed()
            return
        if self._waiting >= self.max_waiting and not self._make_room(tenant):
            raise Overloaded(self.retry_after_s())
        waiter = asyncio.get_running_loop().create_future()
        self._lines.setdefault(tenant, deque()).append(waiter)
        self._waiting += 1
        self._changed()
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # the slot was handed over just as we were cancelled
            else:
                self._forget(tenant, waiter)
            raise

    def _make_room(self, tenant: str) -> bool:
        """Refuse the newest waiter of the tenant with the longest line, if that line is longer than
        `tenant`'s would be with the newcomer in it."""
        if not self._lines:
            return False
        longest = max(self._lines, key=lambda name: len(self._lines[name]))
        if len(self._lines[longest]) <= len(self._lines.get(tenant, ())) + 1:
            return False
        victim = self._lines[longest].pop()
        self._drop_empty(longest)
        self._waiting -= 1
        if not victim.done():  # one cancelled meanwhile just leaves
            victim.set_exception(Overloaded(self.retry_after_s()))
        return True

    def _forget(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        line = self._lines.get(tenant)
        if line is not None and waiter in line:
            line.remove(waiter)
            self._drop_empty(tenant)
            self._waiting -= 1
            self._changed()

    def _drop_empty(self, tenant: str) -> None:
        if not self._lines[tenant]:
            del self._lines[tenant]

    def release(self) -> None:
        """Give a running slot back, handing it straight to the next tenant's first waiter if any."""
        while self._lines:
            tenant = next(iter(self._lines))
            line = self._lines.pop(tenant)
            waiter = line.popleft()
            self._waiting -= 1
            if line:
                self._lines[tenant] = line  # to the end of the turn order
            if not waiter.done():
                waiter.set_result(None)
                self._changed()
                return
        self.running -= 1
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.running, self.waiting)
