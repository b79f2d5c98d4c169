"""The batching settings reach the engine, under polyvox's names and uttera-tts-vllm's `.env` names."""

import pytest

from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.settings import Settings

SEED_ENV = {
    "VLLM_GPU_MEM_UTIL": "0.5",
    "VLLM_MAX_NUM_SEQS": "7",
    "VLLM_MAX_NUM_BATCHED_TOKENS": "333",
    "VOXCPM_INFERENCE_TIMESTEPS": "6",
}


def test_uttera_tts_vllm_env_names_configure_the_engine(monkeypatch: pytest.MonkeyPatch):
    for name, value in SEED_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POLYVOX_NUM_KV_BLOCKS", "64")
    backend = VoxCPMBackend.from_settings(Settings(random_weights="tiny", device="cpu"))
    config = backend.config
    assert (config.gpu_memory_utilization, config.max_num_seqs, config.max_num_batched_tokens) == (
        0.5,
        7,
        333,
    )
    assert config.num_kv_blocks == 64
    assert (config.prefill_policy, config.cuda_graphs, config.compile) == ("mixed", True, False)
    assert backend.inference_timesteps == 6


def test_polyvox_env_names_work_and_explicit_values_win(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("POLYVOX_MAX_NUM_SEQS", "9")
    assert Settings().max_num_seqs == 9
    assert Settings(max_num_seqs=3).max_num_seqs == 3  # an explicit value (a CLI flag) wins


def test_prefill_policy_cuda_graphs_and_compile_reach_the_engine(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("POLYVOX_PREFILL_POLICY", "separate")
    monkeypatch.setenv("POLYVOX_CUDA_GRAPHS", "false")
    monkeypatch.setenv("POLYVOX_TORCH_COMPILE", "true")
    config = VoxCPMBackend.from_settings(Settings(random_weights="tiny", device="cpu")).config
    assert (config.prefill_policy, config.cuda_graphs, config.compile) == ("separate", False, True)
    monkeypatch.setenv("POLYVOX_PREFILL_POLICY", "sometimes")
    with pytest.raises(ValueError, match="prefill_policy"):
        Settings()


def test_torch_threads_default_to_half_the_cores_on_cpu_and_apply_to_the_engine_thread(
    monkeypatch: pytest.MonkeyPatch,
):
    import asyncio
    import os
    import threading

    import torch

    tiny = {"random_weights": "tiny", "device": "cpu", "num_kv_blocks": 64, "engine_process": False}
    backend = VoxCPMBackend.from_settings(Settings(**tiny))
    assert backend.torch_threads == max(1, (os.cpu_count() or 1) // 2)
    monkeypatch.setenv("POLYVOX_TORCH_THREADS", "3")
    backend = VoxCPMBackend.from_settings(Settings(**tiny))
    assert backend.torch_threads == 3

    before = torch.get_num_threads()
    seen: list[int] = []

    async def main():
        await backend.start()
        try:  # the step loop runs on a thread started after the setting took effect, as this one is
            probe = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
            probe.start()
            probe.join()
        finally:
            await backend.stop()

    try:
        asyncio.run(main())
    finally:
        torch.set_num_threads(before)
    assert seen == [3]
