"""A voice design's freeze whose engine process died under it after some of its audio had come back
(`AudioLost`) runs again from its start and freezes the clip it would have made; lost twice, it fails.
The real rank deaths are in tests/engine/test_whole_answer_resend.py; here a tone engine loses runs
when told to (`LosingEngine`)."""

from __future__ import annotations

import asyncio

import pytest

from helpers.losing_engine import LosingEngine
from polyvox.backends.errors import AudioLost
from polyvox.voices.design import VoiceDesign, freeze_design

DESIGN = VoiceDesign("calm", "a calm voice", "Hello there, this is my voice.", seed=7)


def test_a_freeze_that_lost_its_audio_once_runs_again_and_freezes_the_same_clip() -> None:
    unharmed = asyncio.run(freeze_design(DESIGN, LosingEngine(losses=0), max_patches=1000))
    engine = LosingEngine(losses=1)
    frozen = asyncio.run(freeze_design(DESIGN, engine, max_patches=1000))
    assert engine.runs == 2
    assert frozen == unharmed


def test_a_freeze_that_lost_its_audio_twice_fails() -> None:
    with pytest.raises(AudioLost):
        asyncio.run(freeze_design(DESIGN, LosingEngine(losses=2), max_patches=1000))
