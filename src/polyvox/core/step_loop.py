"""`run_steps`: the engine's one step loop, whatever carries its requests in and its outputs out. A
`Transport` is that carrier: the engine in a thread of the server (`async_core.AsyncEngineCore`:
a queue in, the requests' asyncio queues out) or in a process of its own
(`engine/process_main.py` `EngineCoreProc`: a socket both ways). The loop takes what arrived
(waiting for it only when there is nothing to step), steps, and hands the outputs over; a failed
step fails only the requests it ran, and `MAX_CONSECUTIVE_FAILURES` in a row mean the engine itself
is broken."""

from __future__ import annotations

import logging
from typing import Protocol

from polyvox.core.core import EngineCore, StepFailed, StepOutput

log = logging.getLogger(__name__)

# A step failure fails only the requests in that step; this many failed steps in a row mean the
# engine itself is broken (e.g. the device is gone), and the loop stops.
MAX_CONSECUTIVE_FAILURES = 3


class Transport(Protocol):
    @property
    def stopped(self) -> bool:
        """The loop is to end (told to stop, or whoever it served is gone)."""
        ...

    def take(self, wait: bool) -> None:
        """Apply the requests and aborts that arrived (before the next step); `wait`: the core is idle,
        so wait a little for the first."""

    def idle(self) -> None:
        """The core has nothing to step after `take`."""

    def publish(self, outputs: list[StepOutput]) -> None:
        """One step's outputs, to the requests that asked for them."""

    def fail(self, failure: StepFailed) -> None:
        """The step running `failure.seq_ids` failed: they are retired; their requests fail."""


def run_steps(core: EngineCore, transport: Transport) -> None:
    """Step `core` until `transport` stops; StepFailed once `MAX_CONSECUTIVE_FAILURES` steps failed in
    a row (the transport then fails whatever the engine still holds, or its process exits)."""
    failures = 0
    while True:
        transport.take(wait=not core.has_work())
        if transport.stopped:
            return
        if not core.has_work():
            transport.idle()
            continue
        try:
            outputs = core.step()
        except StepFailed as exc:
            failures += 1
            if failures >= MAX_CONSECUTIVE_FAILURES:
                log.error("%d engine steps failed in a row: the engine stops", failures)
                raise
            log.error("engine step failed; failing its %d request(s): %r", len(exc.seq_ids), exc.__cause__)
            transport.fail(exc)
            continue
        failures = 0
        transport.publish(outputs)
