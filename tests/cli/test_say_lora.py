"""`polyvox say --lora DIR` (or `NAME=DIR`) speaks with a LoRA adapter: on the tiny random VoxCPM2 with a
random adapter in the official format, the same seed sounds otherwise than without it, and the same
whichever way the adapter is named. Files are decoded with PyAV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.audio import decode
from polyvox.cli import main
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM

TINY = ("--random-weights", "tiny", "--device", "cpu", "--seed", "1")
TEXT = "Hello there."


@pytest.fixture(scope="module")
def adapters(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    model = VoxCPM2LM(VoxCPM2Config.tiny())
    lora = AdapterConfig(enable_lm=True, enable_dit=True, r=8, alpha=16)
    return {
        name: write_random_adapter(model, root / name, lora, model.lora_default_proj, seed=seed)
        for name, seed in (("alice", 1), ("bob", 2))
    }


def say(tmp_path: Path, *flags: str) -> np.ndarray:
    output = tmp_path / "out.wav"
    assert main(["say", TEXT, "-o", str(output), *TINY, *flags]) == 0
    samples, _ = decode(output.read_bytes())
    assert samples.size > 0
    return samples


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size == b.size and float(np.abs(a - b).max()) < 1e-3


def test_say_speaks_with_the_adapter_its_directory_names(tmp_path, adapters):
    alice = say(tmp_path, "--lora", str(adapters["alice"]))
    # the seed makes a run repeatable (so the difference below is the adapter's), however it is named
    assert same(alice, say(tmp_path, "--lora", f"narrator={adapters['alice']}"))
    assert not same(alice, say(tmp_path))


def test_say_with_several_adapters_speaks_with_the_voice_naming_one(tmp_path, adapters, capsys):
    both = ("--lora", f"alice={adapters['alice']}", "--lora", f"bob={adapters['bob']}")
    bob = say(tmp_path, *both, "--voice", "bob")
    assert same(bob, say(tmp_path, "--lora", str(adapters["bob"])))
    assert main(["say", TEXT, "-o", str(tmp_path / "x.wav"), *TINY, *both]) == 2
    assert "pick one with --voice NAME" in capsys.readouterr().err


def test_say_refuses_an_adapter_that_does_not_fit(tmp_path, adapters, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "lora_config.json").write_text('{"lora_config": {"enable_lm": true, "r": 4}}')
    assert main(["say", TEXT, "-o", str(tmp_path / "x.wav"), *TINY, "--lora", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "LoRA adapter 'broken'" in err and "lora_weights" in err
