"""A voice design's freeze whose engine process died under it after some of its audio had come back
(`AudioLost`) runs again from its start and freezes the clip it would have made; lost twice, it fails.
The real rank deaths are in tests/engine_core/test_whole_answer_resend.py; here a tone engine loses runs
when told to."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import numpy as np
import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.errors import AudioLost
from polyvox.backends.fake import FakeBackend
from polyvox.voices.design import VoiceDesign, freeze_design

DESIGN = VoiceDesign("calm", "a calm voice", "Hello there, this is my voice.", seed=7)


class LosingEngine(FakeBackend):
    """The tone engine, whose first `losses` runs end with AudioLost after some of their audio."""

    def __init__(self, losses: int) -> None:
        super().__init__()
        self.losses = losses
        self.runs = 0

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        self.runs += 1
        chunks = super().generate(request)
        if self.runs <= self.losses:
            yield await anext(chunks)
            await chunks.aclose()
            raise AudioLost("engine rank 0 died (exit code -9)")
        async for chunk in chunks:
            yield chunk


def test_a_freeze_that_lost_its_audio_once_runs_again_and_freezes_the_same_clip() -> None:
    unharmed = asyncio.run(freeze_design(DESIGN, LosingEngine(losses=0), max_patches=1000))
    engine = LosingEngine(losses=1)
    frozen = asyncio.run(freeze_design(DESIGN, engine, max_patches=1000))
    assert engine.runs == 2
    assert frozen == unharmed


def test_a_freeze_that_lost_its_audio_twice_fails() -> None:
    with pytest.raises(AudioLost):
        asyncio.run(freeze_design(DESIGN, LosingEngine(losses=2), max_patches=1000))
