"""The in-thread engine keeps its model across a stop and a start (an idle unload, then a request), and the
model's objects are frozen out of the collector's passes once loaded (polyvox/runtime/heap.py); the
worker of the first start, its KV cache with it, is still collected once the engine has started again,
not kept for ever with the frozen heap. (Frozen with the model, a worker with one reference cycle in it
was kept: made on purpose, that failed this test.)"""

from __future__ import annotations

import asyncio
import gc
import weakref

from polyvox.core.config import BatchingConfig
from polyvox.engine.in_thread import InThreadEngine
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions


def test_a_stopped_workers_kv_cache_is_collected_after_the_engine_starts_again():
    options = WorkerOptions(config=BatchingConfig(num_kv_blocks=256), torch_threads=1)
    engine = InThreadEngine(ModelSpec(random_weights="tiny", device="cpu").source(), options)

    async def stop_and_start() -> tuple[weakref.ref, weakref.ref]:
        await engine.start()
        assert engine.ready and engine.worker is not None
        model, worker = weakref.ref(engine.prompts), weakref.ref(engine.worker)
        await engine.stop()
        await engine.start()
        assert engine.ready and engine.worker is not worker()
        return model, worker

    model, worker = asyncio.run(stop_and_start())
    try:
        gc.collect()
        assert model() is engine.prompts  # the model loaded at the first start serves on
        assert worker() is None, gc.get_referrers(worker())[:5]
    finally:
        asyncio.run(engine.stop())
