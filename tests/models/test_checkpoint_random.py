"""`polyvox checkpoint random`: a random-weight checkpoint in the official layout that both polyvox and
the official package load, with the same speech from the same seed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers.official import import_voxcpm
from polyvox.models.random_checkpoint import write_random_checkpoint
from polyvox.models.voxcpm2.loaded_model import VoxCPM2

TEXT = "Hello world, this is a test."
GEN = dict(max_len=4, min_len=2, inference_timesteps=3, cfg_value=2.0)


def _cli(*args: str) -> subprocess.CompletedProcess:
    polyvox = Path(sys.executable).with_name("polyvox")
    return subprocess.run([str(polyvox), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def cli_checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "tiny"
    result = _cli("checkpoint", "random", "--size", "tiny", "--out", str(out), "--seed", "4")
    assert result.returncode == 0, result.stderr
    return out


def test_cli_writes_the_official_file_layout(cli_checkpoint):
    names = {p.name for p in cli_checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "audiovae.pth", "tokenizer.json"} <= names
    vae = torch.load(cli_checkpoint / "audiovae.pth", weights_only=True)
    assert any(k.endswith(".weight_g") for k in vae["state_dict"])
    assert all(
        v.dtype == torch.float32 for v in load_file(str(cli_checkpoint / "model.safetensors")).values()
    )


def test_cli_checkpoint_loads_in_polyvox_and_speaks(cli_checkpoint):
    audio = VoxCPM2.load(cli_checkpoint, device="cpu").synthesize(TEXT, seed=1, **GEN)
    assert audio.size % 7680 == 0 and audio.size > 0
    assert np.isfinite(audio).all() and np.abs(audio).max() > 1e-3


def test_the_official_package_loads_it_with_every_key_and_generates_the_same_audio(cli_checkpoint):
    official = import_voxcpm()
    model = official.VoxCPM2Model.from_local(str(cli_checkpoint), optimize=False, device="cpu")
    files = set(load_file(str(cli_checkpoint / "model.safetensors")))
    files |= {
        f"audio_vae.{k}" for k in torch.load(cli_checkpoint / "audiovae.pth", weights_only=True)["state_dict"]
    }
    assert files == set(model.state_dict())  # from_local loads non-strictly: check nothing was left out
    torch.manual_seed(9)
    expected = model.generate(target_text=TEXT, **GEN)[0].numpy()
    got = VoxCPM2.load(cli_checkpoint, device="cpu").synthesize(TEXT, seed=9, **GEN)
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_the_same_seed_writes_the_same_weights_and_another_seed_others(cli_checkpoint, tmp_path):
    original = (cli_checkpoint / "model.safetensors").read_bytes()
    assert (
        write_random_checkpoint(tmp_path / "same", "tiny", seed=4) / "model.safetensors"
    ).read_bytes() == original
    assert (
        write_random_checkpoint(tmp_path / "other", "tiny", seed=5) / "model.safetensors"
    ).read_bytes() != original
