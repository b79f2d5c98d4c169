"""Cold starts: the back end loaded when a request needs it and released after `idle_unload_s` idle seconds
(`load_on_demand`: not loaded at start either), for one GPU shared with other work and traffic in bursts.

`ColdStart` owns the back end's load state. A speech request asks for the back end (`loaded`) before it
uses it: a cold back end is started once for every request waiting (each waits within its own deadline;
the load runs on for the others when one gives up). `run` watches the speech service: idle (nothing
accepted, waiting or running) for `idle_unload_s` it stops the back end, which releases its weights and
KV cache (engine processes exit; the in-thread engine keeps its weights, see README). An unload and a
request never cross: one lock orders them, so a request that comes while the back end is being stopped
waits for the stop and then loads it again. While cold, `/ready` answers 200 "cold": the server takes
requests, the first one pays for the load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from polyvox.backends.base import Backend
from polyvox.server.errors import APIError
from polyvox.server.lifecycle.supervisor import BackendSupervisor
from polyvox.settings import Settings

log = logging.getLogger(__name__)


class ColdStart:
    """The back end's load state: `cold` until a request loads it, again after `idle_unload_s` idle."""

    def __init__(
        self,
        backend: Backend,
        supervisor: BackendSupervisor,
        registry: CollectorRegistry,
        *,
        idle_unload_s: float | None,
        load_on_demand: bool,
        check_every_s: float = 0.25,
    ):
        self.backend = backend
        self.supervisor = supervisor
        self.busy: Callable[[], bool] = lambda: False  # the speech service's, from `run`
        self.idle_unload_s = idle_unload_s
        self.on_demand = load_on_demand
        self.check_every_s = check_every_s
        self.cold = load_on_demand
        self._lock = asyncio.Lock()  # a load and an unload, one at a time
        self._loading: asyncio.Task[None] | None = None
        self._idle_since = time.monotonic()
        self.loads = Counter(
            "polyvox_engine_loads",
            "Times the engine was loaded for a request (cold starts).",
            registry=registry,
        )
        self.unloads = Counter(
            "polyvox_engine_unloads",
            "Times the engine was released after idle_unload_s idle.",
            registry=registry,
        )
        self.cold_start_seconds = Gauge(
            "polyvox_engine_cold_start_seconds",
            "How long the last cold start took, from the request that found the engine cold to ready.",
            registry=registry,
        )
        self.cold_gauge = Gauge(
            "polyvox_engine_cold",
            "1 while the engine is not loaded (idle unload, load on demand).",
            registry=registry,
        )
        self.cold_gauge.set_function(lambda: 1.0 if self.cold else 0.0)

    async def loaded(self) -> None:
        """Return once the back end is loaded, loading it if it is cold (one load for every waiter, which
        runs on if this caller is cancelled); 503 `engine_failed` if it could not start."""
        if not self.cold and self._loading is None:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        loading = self._loading
        await asyncio.shield(loading)

    async def _load(self) -> None:
        try:
            async with self._lock:  # after an unload under way, never across it
                if not self.cold:
                    return
                name = self.backend.info.name
                log.info("engine %s is cold: loading it for a request", name)
                started = time.perf_counter()
                try:
                    await self.backend.start()
                except Exception as exc:
                    log.error("engine %s failed to load: %s: %s", name, type(exc).__name__, exc)
                    await self._stop_quietly()
                    raise APIError(
                        503,
                        f"the engine failed to load: {type(exc).__name__}: {exc}",
                        code="engine_failed",
                        headers={"Retry-After": "5"},
                    ) from exc
                seconds = time.perf_counter() - started
                self.cold = False
                self.supervisor.served = True  # from now on a stop is a failure the supervisor handles
                self._idle_since = time.monotonic()
                self.loads.inc()
                self.cold_start_seconds.set(seconds)
                log.info("engine %s loaded in %.2f s (cold start)", name, seconds)
        finally:
            self._loading = None

    async def _stop_quietly(self) -> None:
        try:
            await self.backend.stop()
        except Exception:
            log.exception("engine %s failed to stop after a failed load", self.backend.info.name)

    async def run(self, busy: Callable[[], bool]) -> None:
        """Unload the back end once it has been idle for `idle_unload_s`: no speech request `busy` (a task
        for the app's life)."""
        self.busy = busy
        if self.idle_unload_s is None:
            return
        while True:
            await asyncio.sleep(self.check_every_s)
            now = time.monotonic()
            if self.busy() or self.cold or self._loading is not None or not self.backend.ready:
                self._idle_since = now
                continue
            if now - self._idle_since >= self.idle_unload_s:
                await self.unload()

    async def unload(self) -> None:
        """Stop the back end now, unless a request came meanwhile (it would have found the lock taken)."""
        async with self._lock:
            if self.cold or self.busy() or self._loading is not None:
                return
            name = self.backend.info.name
            log.info("engine %s idle for %.0f s: unloading it", name, self.idle_unload_s or 0)
            self.supervisor.served = False  # a stop on purpose, not a failure to restart from
            self.cold = True
            await self.backend.stop()
            self.unloads.inc()
            log.info("engine %s unloaded; the next request loads it again", name)


def cold_start_for(
    settings: Settings, backend: Backend, supervisor: BackendSupervisor, registry: CollectorRegistry
) -> ColdStart | None:
    """The cold starts `idle_unload_s` and `load_on_demand` ask for; None when neither is set, or with
    several API processes, whose engine ranks the launcher owns and keeps loaded for all of them."""
    if settings.idle_unload_s is None and not settings.load_on_demand:
        return None
    if settings.api_server_count > 1:
        log.warning("idle_unload_s and load_on_demand are ignored with api_server_count > 1")
        return None
    return ColdStart(
        backend,
        supervisor,
        registry,
        idle_unload_s=settings.idle_unload_s,
        load_on_demand=settings.load_on_demand,
    )


async def watch_idle(cold_start: ColdStart | None, busy: Callable[[], bool]) -> None:
    """`cold_start.run(busy)`, or nothing without cold starts (the lifespan's task either way)."""
    if cold_start is not None:
        await cold_start.run(busy)
