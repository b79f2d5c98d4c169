"""Which engines `serve` starts: one per device named, or data_parallel_size of them (CUDA: one per GPU;
the CPU: all on it); several need engine processes."""

from __future__ import annotations

import pytest

from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.engine.model_spec import ModelSpec
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings


def test_one_rank_per_device_named_in_the_environment(monkeypatch):
    monkeypatch.setenv("POLYVOX_DEVICES", "cuda:0, cuda:2")
    settings = Settings(random_weights="tiny")
    ranks = ModelSpec.from_settings(settings).ranks(settings)
    assert [spec.device for spec in ranks] == ["cuda:0", "cuda:2"]
    assert {spec.random_weights for spec in ranks} == {"tiny"}


def test_data_parallel_ranks_on_the_cpu_share_it():
    settings = Settings(random_weights="tiny", device="cpu", data_parallel_size=3)
    assert [spec.device for spec in ModelSpec.from_settings(settings).ranks(settings)] == ["cpu"] * 3


def test_data_parallel_without_engine_processes_is_refused_at_start():
    settings = Settings(random_weights="tiny", device="cpu", data_parallel_size=2, engine_process=False)
    with pytest.raises(StartupError, match="engine_process"):
        VoxCPMBackend.from_settings(settings)
