"""The batching settings reach the engine, under polyvox's names and the seed system's `.env` names."""

import pytest

from polyvox.engines.voxcpm2 import VoxCPM2Engine
from polyvox.settings import Settings

SEED_ENV = {
    "VLLM_GPU_MEM_UTIL": "0.5",
    "VLLM_MAX_NUM_SEQS": "7",
    "VLLM_MAX_NUM_BATCHED_TOKENS": "333",
    "VOXCPM_INFERENCE_TIMESTEPS": "6",
}


def test_seed_system_env_names_configure_the_engine(monkeypatch: pytest.MonkeyPatch):
    for name, value in SEED_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POLYVOX_NUM_KV_BLOCKS", "64")
    engine = VoxCPM2Engine.from_settings(Settings(random_weights="tiny", device="cpu"))
    config = engine.config
    assert (config.gpu_memory_utilization, config.max_num_seqs, config.max_num_batched_tokens) == (
        0.5,
        7,
        333,
    )
    assert config.num_kv_blocks == 64
    assert (config.prefill_policy, config.cuda_graphs, config.compile) == ("mixed", True, False)
    assert engine.inference_timesteps == 6


def test_polyvox_env_names_work_and_explicit_values_win(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("POLYVOX_MAX_NUM_SEQS", "9")
    assert Settings().max_num_seqs == 9
    assert Settings(max_num_seqs=3).max_num_seqs == 3  # an explicit value (a CLI flag) wins


def test_prefill_policy_cuda_graphs_and_compile_reach_the_engine(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("POLYVOX_PREFILL_POLICY", "separate")
    monkeypatch.setenv("POLYVOX_CUDA_GRAPHS", "false")
    monkeypatch.setenv("POLYVOX_TORCH_COMPILE", "true")
    config = VoxCPM2Engine.from_settings(Settings(random_weights="tiny", device="cpu")).config
    assert (config.prefill_policy, config.cuda_graphs, config.compile) == ("separate", False, True)
    monkeypatch.setenv("POLYVOX_PREFILL_POLICY", "sometimes")
    with pytest.raises(ValueError, match="prefill_policy"):
        Settings()
