"""`polyvox say -o FILE` writes the format FILE's suffix names (y.mp3: MP3) unless `--format` says one;
a suffix naming another format than `--format` is refused in one line before anything loads. Files are
opened with PyAV, which reads the container from the bytes, not from the name."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from helpers.audio import decode, pcm_samples
from polyvox.cli import main

# the container PyAV finds in each format's bytes
CONTAINERS = {"mp3": "mp3", "wav": "wav", "flac": "flac", "opus": "ogg", "aac": "aac"}


def container_of(path: Path) -> str:
    with av.open(str(path), format=None) as container:
        assert container.streams.audio, path
        return container.format.name


def probed(path: Path) -> str:
    """The container of `path`'s bytes, read from a copy named without a suffix."""
    copy = path.with_name("probed")
    copy.write_bytes(path.read_bytes())
    return container_of(copy)


@pytest.mark.parametrize("fmt", sorted(CONTAINERS))
def test_the_suffix_chooses_the_format(tmp_path: Path, fmt: str) -> None:
    output = tmp_path / f"y.{fmt}"
    assert main(["say", "Hello there.", "-o", str(output)]) == 0
    assert probed(output) == CONTAINERS[fmt]
    samples, rate = decode(output.read_bytes())
    assert samples.size / rate > 0.3


def test_a_pcm_suffix_writes_headerless_samples(tmp_path: Path) -> None:
    output = tmp_path / "y.pcm"
    assert main(["say", "Hello there.", "-o", str(output)]) == 0
    data = output.read_bytes()
    assert not data.startswith(b"RIFF") and len(data) % 2 == 0
    assert abs(pcm_samples(data)).max() > 0.01


def test_format_chooses_where_the_suffix_names_none(tmp_path: Path) -> None:
    output = tmp_path / "y.audio"
    assert main(["say", "Hello there.", "-o", str(output), "--format", "mp3"]) == 0
    assert probed(output) == "mp3"


def test_no_format_and_no_known_suffix_is_wav(tmp_path: Path) -> None:
    output = tmp_path / "y.audio"
    assert main(["say", "Hello there.", "-o", str(output)]) == 0
    assert probed(output) == "wav"


def test_a_suffix_disagreeing_with_format_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "y.mp3"
    # a model that cannot load: the refusal comes before anything loads
    flags = ["--model", str(tmp_path / "no-such-checkpoint")]
    assert main(["say", "Hello there.", "-o", str(output), "--format", "wav", *flags]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"polyvox say: -o {output} names mp3, but --format wav was given: "
        "name the file .wav, or drop --format to write mp3"
    ]
    assert not output.exists()
