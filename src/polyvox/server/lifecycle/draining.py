"""Graceful shutdown: on SIGTERM the server drains before it exits.

`Lifecycle.draining` turns `/ready` to 503 and refuses new speech requests with 503 while the
listener stays open (so load balancers see the change and clients get an answer, not a refused
connection); in-flight requests run to completion, bounded by `shutdown_grace_s`; then uvicorn's own
graceful shutdown closes the connections and the lifespan stops the back end, and the process exits 0.
A second SIGTERM, or SIGINT, skips the wait.

A request is in flight from the moment it is accepted: while its body is read, while it waits for a
builtin voice's first-use freeze, in the admission queue, and while it runs (`Lifecycle.accepting`
counts it until it holds an admission slot, which counts it from then on). A body still on its way
when the drain begins is not waited for: `server.body_deadline` answers its request 503 at once
(`Lifecycle.bodies_cut`), so a client that declares a body and stalls cannot hold the drain.

A back end that fails its first start stops the server too (`DrainingServer.failure`): the process
exits non-zero instead of answering 503 forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)


class Lifecycle:
    """The drain flag and its deadline; `busy()` says whether requests are still in flight."""

    def __init__(self) -> None:
        self.draining = False
        self.drain_deadline = 0.0
        self.accepted = 0  # requests accepted that hold no admission slot yet
        # Set on the event loop once draining (a signal handler cannot wake the loop's waiters).
        self.bodies_cut = asyncio.Event()

    @contextlib.contextmanager
    def accepting(self) -> Iterator[float]:
        """Count one accepted request as in flight for the block; yields when it was accepted
        (`time.perf_counter()`, where its deadline starts)."""
        self.accepted += 1
        try:
            yield time.perf_counter()
        finally:
            self.accepted -= 1

    def begin_drain(self, grace_s: float) -> None:
        if not self.draining:
            self.draining = True
            self.drain_deadline = time.monotonic() + grace_s

    def drained(self, busy: Callable[[], bool]) -> bool:
        """Draining and either nothing is in flight or the grace period is over."""
        return self.draining and (not busy() or time.monotonic() >= self.drain_deadline)


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM drains first (see the module docstring); exits 0 after a drain."""

    def __init__(
        self,
        config: uvicorn.Config,
        lifecycle: Lifecycle,
        busy: Callable[[], bool],
        grace_s: float,
        failure: Callable[[], str | None] = lambda: None,
        repeat_sigterm_stops: bool = True,
        on_drained: Callable[[], bool] = lambda: True,
    ):
        """`repeat_sigterm_stops` off: a second SIGTERM is ignored (an API process behind the launcher,
        which may get one from a service manager and one from the launcher; SIGINT stops it).
        `on_drained` is asked, once drained, whether to stop now (at each tick until it says yes);
        meanwhile the server keeps its socket and answers 503 (an API process behind the launcher,
        which stops with the others once all have drained). SIGINT stops it all the same."""
        super().__init__(config)
        self.repeat_sigterm_stops = repeat_sigterm_stops
        self.on_drained = on_drained
        self._held = False
        self.lifecycle = lifecycle
        self.busy = busy
        self.grace_s = grace_s
        self.backend_failure = failure
        self.failure: str | None = None  # why the back end failed to start, once the server stopped for it

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self.lifecycle.draining:
            log.info("SIGTERM: draining (up to %.0f s), new requests get 503", self.grace_s)
            self.lifecycle.begin_drain(self.grace_s)
            return
        if sig == signal.SIGTERM:
            self.should_exit = self.should_exit or self.repeat_sigterm_stops  # a second one: stop waiting
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.lifecycle.draining:
            self.lifecycle.bodies_cut.set()
        if not self.should_exit and self.lifecycle.drained(self.busy):
            if self.on_drained():
                log.info("drained: shutting down")
                self.should_exit = True
            elif not self._held:
                log.info("drained: answering 503 until the others have drained")
                self._held = True
        if not self.should_exit and (failure := self.backend_failure()) is not None:
            log.error("the engine failed to start: shutting down")
            self.failure, self.should_exit = failure, True
        return await super().on_tick(counter)
