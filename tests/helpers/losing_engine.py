"""`LosingEngine`: the tone engine, whose first runs end with `AudioLost` after some of their audio, as
when the engine process serving them dies part-way (the real deaths are in tests/engine/)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import numpy as np

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.errors import AudioLost
from polyvox.backends.fake import FakeBackend


class LosingEngine(FakeBackend):
    """Its first `losses` runs yield `before_loss` chunks, then raise AudioLost; the others run whole."""

    def __init__(self, losses: int, before_loss: int = 1, **fake: Any) -> None:
        super().__init__(**fake)
        self.losses = losses
        self.before_loss = before_loss
        self.runs = 0

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        self.runs += 1
        chunks = super().generate(request)
        if self.runs <= self.losses:
            for _ in range(self.before_loss):
                yield await anext(chunks)
            await chunks.aclose()
            raise AudioLost("engine rank 0 died (exit code -9)")
        async for chunk in chunks:
            yield chunk
