"""A clone reference at any rate reaches the VoxCPM2 model as the official code would load it
(`librosa.load`, which resamples with soxr), whether it came through an upload or straight in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvox.backends.base import ReferenceAudio, SynthesisRequest


@pytest.fixture(scope="module")
def voxcpm2():
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.core.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    model = VoxCPM2.random("tiny", device="cpu", dtype="float32")
    return VoxCPMBackend(model, BatchingConfig(num_kv_blocks=16))


def test_a_44k_reference_gives_the_prompt_librosa_resampling_gives(voxcpm2):
    librosa = pytest.importorskip("librosa")
    rate, target = 44_100, voxcpm2.model.vae.sample_rate
    t = np.arange(int(0.9 * rate)) / rate
    noise = 0.05 * np.random.default_rng(3).standard_normal(t.size)
    clip = (0.4 * np.sin(2 * np.pi * 300 * t) + noise).astype(np.float32)
    official = librosa.resample(clip, orig_sr=rate, target_sr=target, res_type="soxr_hq", fix=True)

    def prompt(samples: np.ndarray, sample_rate: int, name: str) -> torch.Tensor:
        ref = ReferenceAudio(samples, sample_rate, content_hash=name, transcript="hello there")
        return voxcpm2._prompt(SynthesisRequest(text="Hi.", reference=ref)).feats

    direct = prompt(clip, rate, "at-44k")
    loaded = prompt(official.astype(np.float32), target, "as-librosa-loads-it")
    assert direct.shape == loaded.shape
    torch.testing.assert_close(direct, loaded, atol=1e-4, rtol=0)


def test_voxcpm2_declares_its_reference_rate_before_the_model_loads(voxcpm2):
    """Clips are decoded straight to the rate the engine declares, known from the config before the
    weights load, and it is the rate the loaded AudioVAE encodes at: no second resampling."""
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.models.model_source import random_source
    from polyvox.voices.clips import ClipLimits, clip_rate, load_clip
    from voices.clips import wav_clip

    unloaded = VoxCPMBackend(random_source("tiny", device="cpu", dtype="float32"))
    assert not unloaded.ready
    assert unloaded.info.reference_rate == voxcpm2.info.reference_rate == voxcpm2.model.vae.sample_rate
    clip = load_clip(wav_clip(1.2), ClipLimits(), clip_rate(unloaded.info))
    assert clip.sample_rate == voxcpm2.model.vae.sample_rate
    assert clip.samples.size == pytest.approx(1.2 * clip.sample_rate, abs=2)
