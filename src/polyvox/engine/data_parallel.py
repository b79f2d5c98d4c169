"""`DataParallelEngine`: one engine process per data-parallel rank (device) behind one API server, each
request routed by the `Router` to a rank that is up. A rank that dies is restarted by its `EngineClient`
while the others serve (their processes and counters untouched); the engine is ready while any rank is
up. The requests the dead rank held end with how they were lost: `EngineDied` for those none of whose
audio had come back (waiting in its queue, being prefilled, or sent as it died), counted per rank as
rerouted, `LostMidAudio` for those that had audio. The engine sends nothing again itself: the one policy
that does is `backends/rerun.py` (the same request, its seed kept, to a live rank, or, with none up, to
the first that comes back, within the server's deadline).

With `connect=True` (an API process behind `api_server_count`), the ranks are processes the launcher
owns and restarts, at `socket_dir`: each is a `ConnectedEngineClient`, routed on the loads every API
process puts on it."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np

from polyvox.core.errors import EngineError
from polyvox.engine.client import EngineClient, engine_address
from polyvox.engine.connected import ConnectedEngineClient
from polyvox.engine.link import EngineDied, LostMidAudio
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.request import EngineRequest
from polyvox.engine.router import NoRankUp, Router
from polyvox.engine.stats import EngineRank, PromptCacheStats
from polyvox.runtime.logs import LogFormat
from polyvox.runtime.ready_signal import ReadySignal


class DataParallelEngine:
    restarts_itself = True  # each rank's client restarts its own process (with backoff)

    def __init__(
        self,
        ranks: list[ModelSpec],
        options: WorkerOptions,
        logging_setup: tuple[str, LogFormat] = ("warning", "text"),
        affinity: bool = True,
        socket_dir: str | None = None,
        connect: bool = False,
        hang_timeout_s: float = 0.0,
    ) -> None:
        """`socket_dir`: where the ranks' sockets are (a temporary directory made at start when None);
        `connect`: only connect to ranks the launcher owns there; `hang_timeout_s`: a rank holding
        requests that makes no step for that long is killed, and so restarted (0: never)."""
        if connect and socket_dir is None:
            raise ValueError("connect needs the socket_dir of the launcher's engines")
        self.specs = ranks
        self.options = options
        self.logging_setup = logging_setup
        self.router = Router(len(ranks), affinity)
        self.clients: list[EngineClient | ConnectedEngineClient] = []
        self.connect = connect
        self.socket_dir = socket_dir
        self.hang_timeout_s = hang_timeout_s
        self._made_dir: str | None = None
        # announced by each rank's client as it comes up or goes down, and here as the engine stops
        self.ready_signal = ReadySignal()

    async def start(self) -> None:
        if self.clients:
            return
        if self.connect:
            await self._connect()
            return
        if self.socket_dir is None:
            self.socket_dir = self._made_dir = tempfile.mkdtemp(prefix="polyvox-engines-")
        clients = [
            EngineClient(
                rank,
                spec,
                self.options,
                self.socket_dir,
                self.logging_setup,
                self.hang_timeout_s,
                self.ready_signal,
            )
            for rank, spec in enumerate(self.specs)
        ]
        self.clients = list(clients)
        results = await asyncio.gather(*(c.start() for c in clients), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.stop()
            raise failures[0]

    async def _connect(self) -> None:
        """Follow every rank; ready once one of them serves (the others join as they come up)."""
        assert self.socket_dir is not None
        clients = [
            ConnectedEngineClient(
                rank, engine_address(self.socket_dir, rank), self.hang_timeout_s, self.ready_signal
            )
            for rank in range(len(self.specs))
        ]
        self.clients = list(clients)
        for client in clients:
            await client.start()
        await self.ready_signal.until(lambda: self.ready)

    async def stop(self) -> None:
        clients, self.clients = self.clients, []
        self.ready_signal.announce()  # requests waiting for a rank learn it stopped
        await asyncio.gather(*(c.stop() for c in clients))
        if self._made_dir is not None:
            shutil.rmtree(self._made_dir, ignore_errors=True)
            self.socket_dir = self._made_dir = None

    async def forget(self, peer: bytes) -> None:
        """Tell every rank this engine owns that a client of theirs is gone (an API process died)."""
        await asyncio.gather(*(c.forget(peer) for c in self.clients if isinstance(c, EngineClient)))

    @property
    def ready(self) -> bool:
        return any(c.up for c in self.clients)

    def ranks(self) -> list[EngineRank]:
        if not self.clients:
            return [EngineRank(False, None) for _ in self.specs]
        router = self.router
        return [
            EngineRank(
                c.up,
                c.stats if c.up else None,
                c.restarts,
                router.by_affinity[rank],
                router.by_load[rank],
                dict(router.rerouted[rank]),
                c.stage,
            )
            for rank, c in enumerate(self.clients)
        ]

    def prompt_cache_stats(self) -> PromptCacheStats:
        each = [c.prompt_cache_stats() for c in self.clients]
        return PromptCacheStats(sum(s.encodes for s in each), sum(s.hits for s in each))

    async def control(self, method: str, **args: Any) -> list[Any]:
        """Call `method` on every rank's worker (e.g. load an adapter everywhere); the results by rank."""
        return list(await asyncio.gather(*(c.control(method, **args) for c in self.clients)))

    async def generate(self, request: EngineRequest) -> AsyncGenerator[np.ndarray, None]:
        """The request's audio from a rank that is up (with none, from the first that comes back). A
        rank that goes away holding it ends it with `EngineDied` when none of its audio had come back
        (counted as rerouted: the layer above sends it again, `backends/rerun.py`), else with
        `LostMidAudio`."""
        rank, client = await self._route(request)
        outputs = client.generate(request)
        audio = False
        try:
            async for chunk in outputs:
                audio = True
                yield chunk
        except EngineDied as exc:
            if audio:
                raise LostMidAudio(str(exc)) from exc
            self.router.rerouted_from(rank, exc.reason)
            raise
        finally:
            await outputs.aclose()

    async def _route(self, request: EngineRequest) -> tuple[int, EngineClient | ConnectedEngineClient]:
        """A rank that is up for `request`, and its client; with none up, the first that comes back."""
        while True:
            clients = self.clients
            if not clients:
                raise EngineError("the VoxCPM2 engine is not started")
            try:
                rank = self.router.route([c.load if c.up else None for c in clients], request)
            except NoRankUp:
                await self._some_rank_up(clients)
                continue
            return rank, clients[rank]

    async def _some_rank_up(self, clients: list[EngineClient | ConnectedEngineClient]) -> None:
        """Return once one of `clients` is up; EngineError if the engine stops first."""
        await self.ready_signal.until(lambda: self.clients is not clients or any(c.up for c in clients))
        if self.clients is not clients:
            raise EngineError("the VoxCPM2 engine stopped")
