"""`ReadySignal`: the one announcement that whether an engine is up changed, made where the change
happens (an engine client learning its process came up or died, the step loop's thread ending, a back
end started or stopped), from any thread, to waiters on any event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable


class ReadySignal:
    """Waiters await `until(condition)`; whoever changes the state the condition reads calls `announce()`
    after the change. Nothing is polled: a waiter looks again only when a change is announced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # announce() may run on another thread than the waiters' loops
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def announce(self) -> None:
        """The state changed: wake every waiter, each on its own event loop."""
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there any more
                loop.call_soon_threadsafe(_wake, waiter)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Return once `condition()` is true (at once if it is), looking again at each announcement."""
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            with self._lock:  # listening before looking, so a change in between is not missed
                self._waiters.append((loop, waiter))
            try:
                if condition():
                    return
                await waiter
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    self._waiters.remove((loop, waiter))


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
