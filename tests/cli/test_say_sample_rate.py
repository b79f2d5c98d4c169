"""`polyvox say` writes the engine's own rate (VoxCPM2: 48 kHz) unless `--sample-rate` names one; the
server's `default_sample_rate` setting does not apply to it. Files are decoded with PyAV."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.audio import decode
from polyvox.cli import main

TINY = ("--random-weights", "tiny", "--device", "cpu")


def test_say_with_voxcpm2_writes_48_khz_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out.wav"
    # The server's setting (not a flag of say, but read from the environment as every setting is).
    monkeypatch.setenv("POLYVOX_DEFAULT_SAMPLE_RATE", "24000")
    assert main(["say", "Native quality, please.", "-o", str(output), *TINY]) == 0
    samples, rate = decode(output.read_bytes())
    assert rate == 48000
    assert samples.size > 0


def test_say_sample_rate_overrides_the_native_rate(tmp_path: Path) -> None:
    output = tmp_path / "out.mp3"
    flags = ["-f", "mp3", "--sample-rate", "24000"]
    assert main(["say", "Twenty four kilohertz.", "-o", str(output), *flags, *TINY]) == 0
    _, rate = decode(output.read_bytes())
    assert rate == 24000
