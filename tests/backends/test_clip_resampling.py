"""A clone reference at any rate reaches the VoxCPM2 model as the official code would load it
(`librosa.load`, which resamples with soxr), whether it came through an upload or straight in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvox.backends.base import ReferenceAudio, SynthesisRequest


@pytest.fixture(scope="module")
def voxcpm2():
    from polyvox.backends.voxcpm2 import VoxCPM2Backend
    from polyvox.batching.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    model = VoxCPM2.random("tiny", device="cpu", dtype="float32")
    return VoxCPM2Backend(model, BatchingConfig(num_kv_blocks=16))


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
