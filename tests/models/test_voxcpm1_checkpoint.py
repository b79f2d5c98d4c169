"""`polyvox checkpoint random --arch voxcpm1|voxcpm1.5` writes a checkpoint the official `VoxCPMModel`
loads whole; polyvox detects the release from its config.json and speaks the same audio at its rate."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers.official import import_voxcpm
from polyvox.models.checkpoint import CheckpointError
from polyvox.models.model_source import checkpoint_source

TEXT = "Hello world, this is a test."
GEN = dict(max_len=4, min_len=2, inference_timesteps=3, cfg_value=2.0)
RATES = {"voxcpm1": 16000, "voxcpm1.5": 44100}


@pytest.fixture(scope="module", params=list(RATES))
def written(request, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("v1") / request.param
    polyvox = Path(sys.executable).with_name("polyvox")
    args = ["checkpoint", "random", "--arch", request.param, "--size", "tiny", "--out", str(out)]
    result = subprocess.run([str(polyvox), *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return request.param, out


def test_the_release_and_its_rates_are_read_from_the_config(written):
    arch, directory = written
    source = checkpoint_source(directory, device="cpu", dtype="float32")
    assert (source.arch, source.sample_rate, source.reference_rate) == (arch, RATES[arch], RATES[arch])


def test_the_official_package_loads_it_whole_and_speaks_the_same_audio(written):
    arch, directory = written
    import_voxcpm()
    from voxcpm.model.voxcpm import VoxCPMModel

    official = VoxCPMModel.from_local(str(directory), optimize=False, device="cpu")
    files = set(load_file(str(directory / "model.safetensors")))
    vae = torch.load(directory / "audiovae.pth", weights_only=True)["state_dict"]
    assert files | {f"audio_vae.{k}" for k in vae} == set(official.state_dict())
    torch.manual_seed(9)
    expected = official.generate(target_text=TEXT, **GEN)[0].numpy()
    model = checkpoint_source(directory, device="cpu", dtype="float32").load()
    got = model.synthesize(TEXT, seed=9, **GEN)
    assert model.arch == arch and model.sample_rate == RATES[arch]
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_an_unknown_architecture_is_refused_by_name(written, tmp_path):
    _, directory = written
    copy = shutil.copytree(directory, tmp_path / "other")
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "architecture": "voxcpm3"}))
    with pytest.raises(CheckpointError, match="voxcpm3"):
        checkpoint_source(copy, device="cpu")
