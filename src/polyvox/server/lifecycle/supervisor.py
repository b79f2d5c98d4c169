"""Back-end supervision: a back end that was serving and stops being ready (e.g. the VoxCPM2 step loop
gave up after several failed steps in a row) is stopped and started again, with a growing pause
between failed tries. Requests in flight when it died have failed already; while it restarts
`/ready` and new speech requests answer 503. Model weights stay loaded: `stop()` / `start()` rebuild
only the engine's runtime (its step loop, KV cache and runner). A back end that restarts its own parts
(`restarts_itself`: engine processes, each rank restarted by its client) is only waited for: `/ready`
says it is restarting until a rank is back.
"""

from __future__ import annotations

import asyncio
import logging

from polyvox.backends.base import Backend
from polyvox.runtime.restart_policy import RestartBackoff
from polyvox.server.lifecycle.draining import Lifecycle
from polyvox.server.metrics import Metrics

log = logging.getLogger(__name__)


class BackendSupervisor:
    """Acts when the back end's readiness changes (`Backend.until_ready`, announced where it changes:
    nothing here is polled) once the back end has started (`served` is set by whoever started it);
    `run()` is a task. A hung engine process is noticed by its client's watchdog (`hang_timeout_s`),
    whose kill is announced as any death is."""

    def __init__(
        self,
        backend: Backend,
        lifecycle: Lifecycle,
        metrics: Metrics,
        backoff: RestartBackoff | None = None,
    ):
        self.backend = backend
        self.lifecycle = lifecycle
        self.metrics = metrics
        self.backoff = backoff or RestartBackoff()  # the pause after a failed restart
        self.served = False
        self.restarting = False  # from the moment a served back end is found down until it is ready again

    async def run(self) -> None:
        while True:
            if self.backend.ready:
                self.restarting = False
                self.backoff.reset()
                await self.backend.until_ready(False)
            elif not self.served or self.lifecycle.draining:
                await self.backend.until_ready()  # still starting for the first time, or shutting down
            elif self.backend.restarts_itself:
                # engine processes: the dead rank's client restarts it with its own backoff; a
                # rebuild here would race that restart and start every rank afresh
                self.restarting = True
                await self.backend.until_ready()
            elif not await self.restart():
                await asyncio.sleep(self.backoff.next_pause())

    async def restart(self) -> bool:
        """Stop and start the back end once; True when it came back ready."""
        name = self.backend.info.name
        log.error("engine %s stopped serving; restarting it", name)
        self.restarting = True
        try:
            await self.backend.stop()
            await self.backend.start()
        except Exception:
            log.exception("engine %s failed to restart", name)
            return False
        self.metrics.backend_restarts.inc()
        log.info("engine %s restarted", name)
        return self.backend.ready
