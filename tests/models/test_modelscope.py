"""Checkpoints on ModelScope (`--model modelscope:ORG/NAME`, or `model_hub = "modelscope"`): a tiny
random checkpoint laid out in a `MODELSCOPE_CACHE` directory as the `modelscope` package lays repos out
(its layout now, and those of its earlier versions it still reads) is found there and served with the
network unreachable; a repo neither cached nor reachable fails at once in one line naming the cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from helpers.audio import decode
from helpers.serve_process import free_port, polyvox_serve
from polyvox.engine.model_spec import ModelSpec
from polyvox.models.model_source import checkpoint_source
from polyvox.models.random_checkpoint import write_random_checkpoint
from polyvox.settings import Settings

pytest.importorskip("modelscope")

REPO = "OpenBMB/VoxCPM2"
# How the modelscope package lays a repo out in its cache: as it writes now, and as its versions up to
# 1.37 did (with MODELSCOPE_CACHE set, and under the default cache's hub/).
LAYOUTS = {
    "snapshots": "models/OpenBMB--VoxCPM2/snapshots/master",
    "legacy": "models/OpenBMB/VoxCPM2",
    "legacy-default": "hub/models/OpenBMB/VoxCPM2",
}


def unreachable_network() -> dict[str, str]:
    """Environment in which ModelScope and the Hugging Face Hub cannot be reached: their endpoints on a
    closed loopback port, and every proxy too."""
    closed = f"http://127.0.0.1:{free_port()}"
    return {
        "MODELSCOPE_ENDPOINT": closed,
        "HF_ENDPOINT": closed,
        "HF_HUB_OFFLINE": "1",
        "HTTP_PROXY": closed,
        "HTTPS_PROXY": closed,
        "ALL_PROXY": closed,
        "NO_PROXY": "",
    }


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_checkpoint(tmp_path_factory.mktemp("checkpoint") / "tiny", "tiny", seed=0)


def cache_with(checkpoint: Path, root: Path, layout: str) -> Path:
    shutil.copytree(checkpoint, root / LAYOUTS[layout])
    return root


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_repo_in_the_modelscope_cache_is_found_there_without_the_network(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    for name, value in unreachable_network().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MODELSCOPE_CACHE", str(cache_with(checkpoint, tmp_path / "cache", layout)))
    source = checkpoint_source(f"modelscope:{REPO}", device="cpu")
    model = source.load()
    assert model.config.model_dump() == checkpoint_source(checkpoint, device="cpu").load().config.model_dump()


def test_model_hub_makes_a_bare_repo_id_a_modelscope_one(
    checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in unreachable_network().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MODELSCOPE_CACHE", str(cache_with(checkpoint, tmp_path / "cache", "snapshots")))
    spec = ModelSpec.from_settings(Settings(model=REPO, model_hub="modelscope", device="cpu"))
    assert spec.model == f"modelscope:{REPO}"
    assert spec.source().sample_rate == checkpoint_source(checkpoint, device="cpu").sample_rate
    # a directory here stays a directory, whatever the hub
    assert ModelSpec.from_settings(Settings(model=str(checkpoint), model_hub="modelscope")).model == str(
        checkpoint
    )


def test_served_from_the_modelscope_cache_with_the_network_unreachable(
    checkpoint: Path, tmp_path: Path
) -> None:
    env = {
        **unreachable_network(),
        "MODELSCOPE_CACHE": str(cache_with(checkpoint, tmp_path / "cache", "snapshots")),
    }
    flags = (
        "--model",
        f"modelscope:{REPO}",
        "--device",
        "cpu",
        "--num-kv-blocks",
        "256",
        "--log-level",
        "warning",
    )
    with polyvox_serve(*flags, env=env) as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        speech = client.audio.speech.create(
            model="tts-1", voice="alloy", input="Served offline.", response_format="wav"
        )
        samples, rate = decode(speech.content)
        assert rate > 0 and samples.size > 0


def test_a_repo_neither_cached_nor_reachable_fails_at_once_naming_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "empty-cache"
    env = {**os.environ, **unreachable_network(), "MODELSCOPE_CACHE": str(cache)}
    env.pop("POLYVOX_CONFIG", None)
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--model", f"modelscope:{REPO}", "--port", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    message = result.stderr[result.stderr.index("polyvox serve: ") :]
    assert message.strip().count("\n") == 0, message  # one line
    assert str(cache) in message and f"modelscope:{REPO}" in message
    assert "cannot be reached" in message
