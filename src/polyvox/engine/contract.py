"""`Engine`: what `VoxCPMBackend` drives, in a thread of the server (`InThreadEngine`) or in engine
processes, one per data-parallel rank (`DataParallelEngine`). Statistics come per rank."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import numpy as np

from polyvox.engine.request import EngineRequest
from polyvox.engine.stats import EngineRank, PromptCacheStats
from polyvox.runtime.ready_signal import ReadySignal


class Engine(Protocol):
    # True when a rank that dies is started again by the engine itself (engine processes): the
    # server's supervisor must not rebuild the whole engine then, which would restart the live ranks.
    restarts_itself: bool
    # announced whenever `ready` may have changed, where it changes (see `ReadySignal`)
    ready_signal: ReadySignal

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    @property
    def ready(self) -> bool:
        """Some rank can take a request."""
        ...

    def ranks(self) -> list[EngineRank]:
        """Per rank: up or not, its batching counters, restarts and routing."""
        ...

    def prompt_cache_stats(self) -> PromptCacheStats: ...

    async def control(self, method: str, **args: Any) -> list[Any]:
        """Call `method` on every rank's `EngineWorker.control`: their answers, in rank order."""
        ...

    def generate(self, request: EngineRequest) -> AsyncIterator[np.ndarray]:
        """The request's 48 kHz chunks; closing early frees it in the engine. EngineError when the
        engine (or the rank serving it) fails, EngineOverloaded a kind of it; EngineInputError when its
        prompt leaves no room or it names no loaded adapter."""
        ...
