"""`DataParallelEngine`: one engine process per data-parallel rank (device) behind one API server, each
request routed by the `Router`. A rank that dies fails only its own requests and is restarted by its
`EngineClient` while the others serve (their processes and counters untouched); the engine is ready
while any rank is up."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np

from polyvox.backends.base import EngineRank, PromptCacheStats, SynthesisRequest
from polyvox.backends.errors import BackendError
from polyvox.engine_core.client import EngineClient
from polyvox.engine_core.model_spec import ModelSpec
from polyvox.engine_core.options import WorkerOptions
from polyvox.engine_core.router import NoRankUp, Router, voice_key
from polyvox.logs import LogFormat

log = logging.getLogger(__name__)


class DataParallelEngine:
    restarts_itself = True  # each rank's client restarts its own process (with backoff)

    def __init__(
        self,
        ranks: list[ModelSpec],
        options: WorkerOptions,
        logging_setup: tuple[str, LogFormat] = ("warning", "text"),
        affinity: bool = True,
    ) -> None:
        self.specs = ranks
        self.options = options
        self.logging_setup = logging_setup
        self.router = Router(len(ranks), affinity)
        self.clients: list[EngineClient] = []
        self._socket_dir: str | None = None

    async def start(self) -> None:
        if self.clients:
            return
        self._socket_dir = tempfile.mkdtemp(prefix="polyvox-engines-")
        self.clients = [
            EngineClient(rank, spec, self.options, self._socket_dir, self.logging_setup)
            for rank, spec in enumerate(self.specs)
        ]
        results = await asyncio.gather(*(c.start() for c in self.clients), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.stop()
            raise failures[0]

    async def stop(self) -> None:
        clients, self.clients = self.clients, []
        await asyncio.gather(*(c.stop() for c in clients))
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

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
            )
            for rank, c in enumerate(self.clients)
        ]

    def prompt_cache_stats(self) -> PromptCacheStats:
        each = [c.prompt_cache_stats() for c in self.clients]
        return PromptCacheStats(sum(s.encodes for s in each), sum(s.hits for s in each))

    async def control(self, method: str, **args: Any) -> list[Any]:
        """Call `method` on every rank's worker (e.g. load an adapter everywhere); the results by rank."""
        return list(await asyncio.gather(*(c.control(method, **args) for c in self.clients)))

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        clients = self.clients
        try:
            rank = self.router.choose([c.load if c.up else None for c in clients], voice_key(request))
        except NoRankUp as exc:
            raise BackendError(str(exc)) from exc
        outputs = clients[rank].generate(request)
        try:
            async for chunk in outputs:
                yield chunk
        finally:
            await outputs.aclose()
