"""`BackendWrapper`: a Backend that hands everything to a real inner engine, for tests that watch or
steer its generation by overriding `generate` (the inner engine does the work)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np

from polyvox.backends.base import Backend, SynthesisRequest


class BackendWrapper:
    """Passes the Backend contract through to `inner`; subclasses override `generate`."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.info = inner.info

    @property
    def ready(self) -> bool:
        return self.inner.ready

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    def validate(self, request: SynthesisRequest) -> None:
        self.inner.validate(request)

    def generate(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        return self.inner.generate(request)
