"""The official VoxCPM2 (tiny config, random N(0, 0.15) weights, so attention is far from uniform)
and polyvox's VoxCPM2LM loaded from its state_dict, plus the test tokenizer both load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers.official import build_official_model, lm_state_dict
from polyvox.models.tokenizer import TextTokenizer, build_test_tokenizer
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM


@pytest.fixture(scope="session")
def tiny_config() -> VoxCPM2Config:
    return VoxCPM2Config.tiny()


@pytest.fixture(scope="session")
def tokenizer_dir(tiny_config, tmp_path_factory) -> Path:
    return build_test_tokenizer(tmp_path_factory.mktemp("tokenizer"), tiny_config.lm_config.vocab_size)


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir) -> TextTokenizer:
    return TextTokenizer.from_pretrained(tokenizer_dir)


def polyvox_twin(official, config: VoxCPM2Config) -> VoxCPM2LM:
    model = VoxCPM2LM(config).eval()
    model.load_state_dict(lm_state_dict(official), strict=True)
    return model


@pytest.fixture(scope="session")
def official_lm(tiny_config, tokenizer_dir):
    return build_official_model(tiny_config, tokenizer_dir, seed=0, std=0.15)


@pytest.fixture(scope="session")
def polyvox_lm(official_lm, tiny_config) -> VoxCPM2LM:
    return polyvox_twin(official_lm, tiny_config)


@pytest.fixture
def latents():
    """Latent patches `[T, P, D]` standing in for VAE-encoded prompt audio (the same on both sides)."""

    def make(n: int, seed: int, config: VoxCPM2Config = VoxCPM2Config.tiny()) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return torch.randn(n, config.patch_size, config.feat_dim, generator=g)

    return make
