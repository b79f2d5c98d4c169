"""LoRA on or off: an engine started without --lora serves adapters only with --enable-lora (its slots'
memory reserved up front); without it /admin/lora answers 404 saying how to turn it on. A real uvicorn
server on loopback with the tiny random VoxCPM2 stepping in a thread, decoded with PyAV."""

from __future__ import annotations

import httpx
import pytest

from helpers.audio import decode
from helpers.server import running_server
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM
from polyvox.server.app import create_app
from polyvox.settings import Settings


@pytest.mark.parametrize("enabled", [False, True], ids=["off", "enable-lora"])
def test_run_time_adapters_need_lora_on(tmp_path, enabled):
    model = VoxCPM2LM(VoxCPM2Config.tiny())
    lora = AdapterConfig(enable_lm=True, enable_dit=True, r=8, alpha=16)
    directory = write_random_adapter(model, tmp_path / "carol", lora, model.lora_default_proj)
    settings = Settings(
        random_weights="tiny", device="cpu", engine_process=False, num_kv_blocks=256, cache_enabled=False,
        voices_dir=tmp_path / "voices", enable_lora=enabled,
    )  # fmt: skip
    with running_server(create_app(settings)) as url:
        loaded = httpx.post(f"{url}/admin/lora", json={"name": "carol", "path": str(directory)}, timeout=60)
        if not enabled:
            assert loaded.status_code == 404
            assert "--enable-lora" in loaded.json()["error"]["message"]
            return
        assert loaded.status_code == 201, loaded.text
        body = {"input": "Hello.", "voice": "carol", "response_format": "wav", "seed": 1}
        speech = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
        assert speech.status_code == 200, speech.text
        assert decode(speech.content)[0].size > 0
