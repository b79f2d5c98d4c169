"""`polyvox say --pitch N` and `--emotion E`, as the server's `pitch` and `emotion` fields: the embedded
voice moves by about N semitones (its spectrum: tests/helpers/pitch.py) at the same length; an emotion
changes what VoxCPM2 (tiny random weights) says for the same seed, and the embedded voice, which speaks
one way, refuses any but neutral naming the engine; values out of range are refused before anything
loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.audio import pcm_samples
from helpers.pitch import shift_semitones
from polyvox.cli import main

librosa = pytest.importorskip("librosa")
pytest.importorskip("piper")

TEXT = "The quick brown fox jumps over the lazy dog."
RATE = 24000  # pcm's rate


def say(tmp_path: Path, name: str, *flags: str) -> np.ndarray:
    out = tmp_path / f"{name}.pcm"
    assert main(["say", TEXT, "-f", "pcm", "-o", str(out), *flags]) == 0
    return pcm_samples(out.read_bytes())


def test_say_pitch_moves_the_voice_by_the_semitones_at_the_same_length(tmp_path: Path) -> None:
    plain = say(tmp_path, "plain")
    higher = say(tmp_path, "higher", "--pitch", "7")
    # Two runs of the embedded voice need not be the same audio (its sampling): another take, so within
    # a semitone (tests/server/test_pitch.py compares one audio shifted, more closely).
    moved = shift_semitones(higher, plain, RATE)
    assert 6 < moved < 8, moved
    assert higher.size == pytest.approx(plain.size, rel=0.1)


def test_say_refuses_a_pitch_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["say", TEXT, "-o", str(tmp_path / "x.wav"), "--pitch", "13"]) == 2
    assert "--pitch must be between -12 and 12" in capsys.readouterr().err
    assert not (tmp_path / "x.wav").exists()


def test_say_emotion_on_the_embedded_voice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert say(tmp_path, "neutral", "--emotion", "neutral").size > RATE  # the one way it speaks
    assert main(["say", TEXT, "-o", str(tmp_path / "x.wav"), "--emotion", "happy"]) == 2
    error = capsys.readouterr().err
    assert "emotion 'happy'" in error and "embedded" in error, error
    assert not (tmp_path / "x.wav").exists()


def test_say_emotion_changes_what_voxcpm2_says(tmp_path: Path) -> None:
    tiny = ("--random-weights", "tiny", "--device", "cpu", "--seed", "7")
    plain = say(tmp_path, "plain", *tiny)
    assert np.array_equal(say(tmp_path, "again", *tiny), plain)  # the same seed says the same
    happy = say(tmp_path, "happy", *tiny, "--emotion", "happy")
    assert happy.size > 0 and not np.array_equal(happy, plain)
