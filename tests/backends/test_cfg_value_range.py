"""One `cfg_value` range and one `inference_timesteps` range: the speech request, a stored voice, the
default setting and the VoxCPM2 back end accept exactly the same values of each."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.errors import BackendInputError
from polyvox.server.protocol import SpeechRequest
from polyvox.settings import Settings
from polyvox.voices.store import VoiceEntry

VALUES = [0.0, 0.4, 0.5, 2.0, 5.0, 5.5, 7.0, 10.0]


def _accepts(check) -> bool:
    try:
        check()
    except (ValidationError, BackendInputError):
        return False
    return True


@pytest.fixture(scope="module")
def voxcpm2():
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.core.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    return VoxCPMBackend(
        VoxCPM2.random("tiny", device="cpu", dtype="float32"), BatchingConfig(num_kv_blocks=16)
    )


@pytest.mark.parametrize("value", VALUES)
def test_every_layer_accepts_the_same_cfg_values(voxcpm2, value: float) -> None:
    request = _accepts(lambda: SpeechRequest(input="hi", cfg_value=value))
    voice = _accepts(lambda: VoiceEntry(audio="clip.wav", cfg_value=value))
    setting = _accepts(lambda: Settings(cfg_value=value))
    backend = _accepts(lambda: voxcpm2.validate(SynthesisRequest(text="hi", cfg_value=value)))
    assert request == voice == setting == backend == (0.5 <= value <= 5.0)


@pytest.mark.parametrize("value", [0, 1, 2, 10, 100, 101, 1000])
def test_every_layer_accepts_the_same_inference_timesteps(voxcpm2, value: int) -> None:
    request = _accepts(lambda: SpeechRequest(input="hi", inference_timesteps=value))
    voice = _accepts(lambda: VoiceEntry(audio="clip.wav", inference_timesteps=value))
    setting = _accepts(lambda: Settings(inference_timesteps=value))
    backend = _accepts(lambda: voxcpm2.validate(SynthesisRequest(text="hi", inference_timesteps=value)))
    assert request == voice == setting == backend == (1 <= value <= 100)
