"""Checkpoint loading: the official file layouts, dtypes, Hugging Face repo ids, and wrong or partial
checkpoints failing fast with a report of the keys at fault."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from polyvox.models.checkpoint import CheckpointError
from polyvox.models.random_checkpoint import write_random_checkpoint
from polyvox.models.voxcpm2.loaded_model import VoxCPM2

TEXT = "Hello world."
GEN = dict(seed=1, max_len=4, min_len=2, inference_timesteps=2)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp("pristine"), "tiny", seed=0)


@pytest.fixture
def ckpt(pristine, tmp_path):
    """A fresh copy of a complete tiny checkpoint that a test may damage."""
    return shutil.copytree(pristine, tmp_path / "ckpt")


@pytest.fixture(scope="module")
def reference_audio(pristine) -> np.ndarray:
    return VoxCPM2.load(pristine, device="cpu").synthesize(TEXT, **GEN)


def _edit_lm(ckpt, edit) -> None:
    state = load_file(str(ckpt / "model.safetensors"))
    edit(state)
    save_file(state, str(ckpt / "model.safetensors"))


def _load_error(path) -> str:
    with pytest.raises(CheckpointError) as info:
        VoxCPM2.load(path, device="cpu")
    return str(info.value)


def test_missing_keys_are_listed(ckpt):
    _edit_lm(ckpt, lambda s: [s.pop("stop_head.weight"), s.pop("base_lm.layers.1.mlp.up_proj.weight")])
    message = _load_error(ckpt)
    assert "2 missing keys" in message
    assert "stop_head.weight" in message and "base_lm.layers.1.mlp.up_proj.weight" in message


def test_unexpected_keys_are_listed(ckpt):
    _edit_lm(ckpt, lambda s: s.update({"base_lm.layers.9.extra.weight": torch.zeros(2, 2)}))
    message = _load_error(ckpt)
    assert "1 unexpected keys: base_lm.layers.9.extra.weight" in message


def test_mis_shaped_keys_are_listed_with_both_shapes(ckpt):
    _edit_lm(ckpt, lambda s: s.update({"stop_proj.weight": torch.zeros(64, 32)}))
    message = _load_error(ckpt)
    assert "mis-shaped" in message
    assert "stop_proj.weight (checkpoint [64, 32], model [64, 64])" in message


def test_a_damaged_audio_vae_is_reported_too(ckpt):
    state = torch.load(ckpt / "audiovae.pth", weights_only=True)["state_dict"]
    del state["decoder.model.0.weight_v"]
    torch.save({"state_dict": state}, ckpt / "audiovae.pth")
    message = _load_error(ckpt)
    assert "audiovae.pth" in message and "decoder.model.0.weight" in message


def test_a_truncated_weights_file_is_a_checkpoint_error(ckpt):
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert "could not be read" in _load_error(ckpt)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "audiovae.pth", "tokenizer.json"])
def test_a_missing_file_is_named(ckpt, name):
    (ckpt / name).unlink()
    assert name.split(".")[0] in _load_error(ckpt).lower()


def test_a_missing_directory_is_a_checkpoint_error(tmp_path):
    assert "does not exist" in _load_error(tmp_path / "nowhere")


def test_the_alternative_official_layout_loads_the_same_model(ckpt, reference_audio):
    """pytorch_model.bin (state under "state_dict") and audiovae.safetensors instead of the defaults."""
    lm = load_file(str(ckpt / "model.safetensors"))
    torch.save({"state_dict": lm}, ckpt / "pytorch_model.bin")
    vae = torch.load(ckpt / "audiovae.pth", weights_only=True)["state_dict"]
    save_file(vae, str(ckpt / "audiovae.safetensors"))
    (ckpt / "model.safetensors").unlink()
    (ckpt / "audiovae.pth").unlink()
    audio = VoxCPM2.load(ckpt, device="cpu").synthesize(TEXT, **GEN)
    np.testing.assert_allclose(audio, reference_audio, atol=1e-5, rtol=0)


def test_an_lm_file_that_carries_the_vae_needs_no_separate_vae_file(ckpt, reference_audio):
    """A whole official `VoxCPM2Model.state_dict()` saved as one file (VAE under `audio_vae.`)."""
    vae = torch.load(ckpt / "audiovae.pth", weights_only=True)["state_dict"]
    _edit_lm(ckpt, lambda s: s.update({f"audio_vae.{k}": v for k, v in vae.items()}))
    (ckpt / "audiovae.pth").unlink()
    audio = VoxCPM2.load(ckpt, device="cpu").synthesize(TEXT, **GEN)
    np.testing.assert_allclose(audio, reference_audio, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_lm_keeps_a_float32_vae_and_still_speaks(pristine, dtype):
    model = VoxCPM2.load(pristine, device="cpu", dtype=str(dtype).removeprefix("torch."))
    assert model.dtype == dtype
    assert {p.dtype for p in model.lm.parameters()} == {dtype}
    assert {p.dtype for p in model.vae.parameters()} == {torch.float32}
    audio = model.synthesize(TEXT, **GEN)
    assert np.isfinite(audio).all() and np.abs(audio).max() > 1e-3


def test_a_hugging_face_repo_id_resolves_from_the_cache_and_fails_clearly_when_offline(pristine, tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--polyvox-test--tiny"
    shutil.copytree(pristine, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    script = textwrap.dedent(
        """
        from polyvox.models.voxcpm2.loaded_model import VoxCPM2
        from polyvox.models.checkpoint import CheckpointError
        model = VoxCPM2.load("polyvox-test/tiny", device="cpu")
        print("loaded", model.sample_rate)
        try:
            VoxCPM2.load("polyvox-test/absent", device="cpu")
        except CheckpointError as exc:
            print("error", exc)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "loaded 48000" in out.stdout
    assert (
        "error checkpoint 'polyvox-test/absent' is not a local directory, nor in the local Hugging Face cache"
        in out.stdout
    )
    assert "HF_HUB_OFFLINE" in out.stdout
