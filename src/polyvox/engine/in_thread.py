"""`InThreadEngine`: the engine core stepping in a thread of the server's own process (an `EngineWorker`
driven by `AsyncEngineCore`). Tests and `polyvox say` use it, and `serve` with `engine_process` off."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np
import torch

from polyvox.core.async_core import AsyncEngineCore, EngineCoreDead
from polyvox.core.errors import EngineError
from polyvox.engine.options import WorkerOptions
from polyvox.engine.prompts import PromptBuilder
from polyvox.engine.request import EngineRequest
from polyvox.engine.stats import EngineRank, PromptCacheStats
from polyvox.engine.worker import EngineWorker
from polyvox.models.interface import SpeechModel
from polyvox.models.model_source import ModelSource
from polyvox.runtime.heap import freeze_heap
from polyvox.runtime.ready_signal import ReadySignal


class InThreadEngine:
    """One engine in this process; the model is loaded at `start` when given as a `ModelSource`. A
    rebuilt engine (stop, start after a failure) keeps the model and the voice prompts it encoded."""

    restarts_itself = False  # a dead step loop is rebuilt by the server's supervisor

    def __init__(self, model: SpeechModel | ModelSource, options: WorkerOptions) -> None:
        self._source = model if isinstance(model, ModelSource) else None
        self.options = options
        self.prompts: PromptBuilder | None = None
        if not isinstance(model, ModelSource):
            self.prompts = options.prompt_builder(model)
        self.worker: EngineWorker | None = None
        self.step_loop: AsyncEngineCore | None = None
        # announced as it starts, stops, and when its step loop gives up (on the loop's own thread)
        self.ready_signal = ReadySignal()

    async def start(self) -> None:
        if self.step_loop is None:
            step_loop = await asyncio.to_thread(self._build)
            step_loop.start()
            self.step_loop = step_loop
            self.ready_signal.announce()

    def _build(self) -> AsyncEngineCore:
        if self.options.torch_threads is not None:
            torch.set_num_threads(self.options.torch_threads)
        if self.prompts is None:
            assert self._source is not None
            self.prompts = self.options.prompt_builder(self._source.load())
            self._source = None
            # the loaded model's objects leave the collector's passes, as an engine process's do; it lives
            # as long as this engine, and a worker does not (a stop and a start make another): frozen, a
            # worker's cycles (its KV cache with them) would never be collected
            freeze_heap()
        self.worker = self.options.worker(self.prompts)
        return AsyncEngineCore(self.worker.core, on_exit=self.ready_signal.announce)

    async def stop(self) -> None:
        step_loop, self.step_loop = self.step_loop, None
        if step_loop is not None:
            self.ready_signal.announce()
            await asyncio.to_thread(step_loop.stop)

    @property
    def ready(self) -> bool:
        return self.step_loop is not None and self.step_loop.running

    def ranks(self) -> list[EngineRank]:
        return [EngineRank(self.ready, self.step_loop.stats() if self.step_loop is not None else None)]

    def prompt_cache_stats(self) -> PromptCacheStats:
        return self.prompts.prompt_cache.stats() if self.prompts is not None else PromptCacheStats()

    async def control(self, method: str, **args: Any) -> list[Any]:
        """Call `method` on the worker (see `EngineWorker.control`) off the event loop: its one answer."""
        if self.worker is None:
            raise EngineError("the VoxCPM2 engine is not started")
        return [await asyncio.to_thread(self.worker.control, method, args)]

    async def generate(self, request: EngineRequest) -> AsyncGenerator[np.ndarray, None]:
        step_loop, worker = self.step_loop, self.worker
        if step_loop is None or worker is None:
            raise EngineError("the VoxCPM2 engine is not started")
        prompt, params = await asyncio.to_thread(worker.prepare, request)
        outputs = step_loop.generate(prompt, params, request.request_id)
        try:
            async for out in outputs:
                yield out.audio
        except EngineCoreDead as exc:
            raise EngineError(str(exc)) from exc
        finally:
            await outputs.aclose()
