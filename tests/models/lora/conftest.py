"""Adapters in the official on-disk format for the tiny VoxCPM2 of tests/models, and polyvox twins of the
official model that serve them."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.official_lora import EVERYWHERE, LM_AND_DIT, write_adapter
from polyvox.models.voxcpm2.model import VoxCPM2LM

from ..conftest import polyvox_twin

CONFIGS = {"lm_dit": (LM_AND_DIT, 5), "everywhere": (EVERYWHERE, 6), "lm_dit_2": (LM_AND_DIT, 7)}


@pytest.fixture(scope="session")
def adapter_dirs(tmp_path_factory, tiny_config, tokenizer_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    return {
        name: write_adapter(root / name, tiny_config, tokenizer_dir, lora, seed=seed)
        for name, (lora, seed) in CONFIGS.items()
    }


@pytest.fixture
def serving_lm(official_lm, tiny_config, adapter_dirs) -> VoxCPM2LM:
    """A fresh twin of `official_lm` with every test adapter registered (3 slots of rank 8)."""
    model = polyvox_twin(official_lm, tiny_config)
    bank = model.serve_adapters(max_loaded=3, max_rank=8)
    for name, directory in adapter_dirs.items():
        bank.register(name, directory)
    return model
