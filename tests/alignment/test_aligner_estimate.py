"""The `estimate` aligner: the piece's duration shared among its words by spoken length, inside the
sound, every span approximate, for any audio."""

from __future__ import annotations

import numpy as np
import pytest

from polyvox.alignment.aligners import make_aligner
from polyvox.runtime.startup import StartupError

RATE = 16000


def tone(seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_spans_follow_the_words_back_to_back_over_the_sound():
    audio = np.concatenate([np.zeros(RATE // 2, np.float32), tone(1.0), np.zeros(RATE // 2, np.float32)])
    spans = make_aligner("estimate").align(audio, RATE, ["hello,", "big", "world"])

    assert len(spans) == 3
    assert all(s.approximate for s in spans)
    assert [s.end for s in spans[:-1]] == [s.start for s in spans[1:]]
    # the half second of silence either side is trimmed (to within the 40 ms kept at each edge)
    assert 0.42 <= spans[0].start <= 0.5
    assert 1.5 <= spans[-1].end <= 1.58
    # shared by letters: "hello," (5) is 5/3 of "big" (3); "world" (5) the same as "hello,"
    lengths = [s.end - s.start for s in spans]
    assert lengths[0] == pytest.approx(lengths[1] * 5 / 3)
    assert lengths[2] == pytest.approx(lengths[0])


def test_punctuation_alone_takes_no_time():
    spans = make_aligner("estimate").align(tone(1.0), RATE, ["yes", "—", "no"])
    assert spans[1].start == spans[1].end


@pytest.mark.parametrize(
    "audio",
    [
        np.zeros(RATE, np.float32),
        np.random.default_rng(0).standard_normal(RATE).astype(np.float32),
        np.zeros(3, np.float32),
        np.zeros(0, np.float32),
        np.full(RATE, np.nan, np.float32),
    ],
    ids=["silence", "noise", "three samples", "empty", "nan"],
)
def test_odd_audio_gives_ordered_spans_within_it(audio):
    words = ["one", "two", "three"]
    spans = make_aligner("estimate").align(audio, RATE, words)

    duration = len(audio) / RATE
    assert len(spans) == len(words)
    assert all(0.0 <= s.start <= s.end <= duration for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_no_words_no_spans():
    assert make_aligner("estimate").align(tone(0.5), RATE, []) == []


def test_an_unknown_aligner_is_a_startup_error():
    with pytest.raises(StartupError):
        make_aligner("/nonexistent/ctc-model")
