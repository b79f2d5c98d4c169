"""An engine rank restarting after its adapters' directories were deleted comes back serving them: a
rank registers the adapters as the API server read them when they were loaded (at start or through
/admin/lora), not their directories again. `polyvox serve` as a child process, its engine process
killed with SIGKILL, spoken to through the official `openai` client and decoded with PyAV."""

from __future__ import annotations

import os
import shutil
import signal

import httpx
import numpy as np
import openai

from engine.processes import engine_pids
from engine.serving import per_rank
from helpers.audio import decode
from helpers.metrics import scrape
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM

LORA = AdapterConfig(enable_lm=True, enable_dit=True, r=8, alpha=16)


def speak(url: str, voice: str) -> np.ndarray:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
    speech = client.audio.speech.create(
        model="voxcpm2", voice=voice, input="Hello again.", response_format="wav", extra_body={"seed": 3}
    )
    samples, _ = decode(speech.content)
    assert samples.size > 0
    return samples


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size == b.size and float(np.abs(a - b).max()) < 1e-3


def test_a_rank_restarted_after_its_adapters_directories_were_deleted_still_speaks_with_them(tmp_path):
    model = VoxCPM2LM(VoxCPM2Config.tiny())
    alice = write_random_adapter(model, tmp_path / "alice", LORA, model.lora_default_proj, seed=1)
    bob = write_random_adapter(model, tmp_path / "bob", LORA, model.lora_default_proj, seed=2)
    flags = (
        "--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "512", "--no-cache-enabled",
        "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning", "--engine-process",
        "--lora", f"alice={alice}",
    )  # fmt: skip
    with polyvox_serve(*flags) as (proc, url):
        loaded = httpx.post(f"{url}/admin/lora", json={"name": "bob", "path": str(bob)}, timeout=60)
        assert loaded.status_code == 201, loaded.text  # loaded at run time
        before = {voice: speak(url, voice) for voice in ("alice", "bob")}
        shutil.rmtree(alice)
        shutil.rmtree(bob)

        (engine,) = engine_pids(proc.pid)
        os.kill(engine, signal.SIGKILL)
        wait_until(
            lambda: per_rank(scrape(url), "polyvox_engine_rank_restarts_total")[0] >= 1, "the rank restarted"
        )
        wait_until(lambda: httpx.get(f"{url}/ready").status_code == 200, "the rank is up again")
        assert engine_pids(proc.pid) != [engine]

        for voice, samples in before.items():
            assert same(speak(url, voice), samples), voice
        listed = httpx.get(f"{url}/admin/lora").json()["data"]
        assert [a["name"] for a in listed] == ["alice", "bob"]
