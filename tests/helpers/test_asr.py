"""The test-side speech recognition helpers: WER scoring and transcription of silence."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.asr import to_16k, transcribe, word_error_rate


def test_identical_text_has_no_errors_regardless_of_case_and_punctuation():
    assert word_error_rate("Hello, World! It's 7.", "hello world it's seven") == 0.0


def test_numbers_and_amounts_written_in_digits_count_as_the_words_spoken():
    spoken = "I bought three apples for five dollars and fifty cents, and 21 pears for $2."
    assert word_error_rate(spoken, "I bought 3 apples for $5.50 and twenty one pears for two dollars") == 0.0
    assert word_error_rate("five dollars", "$5.50") == pytest.approx(3 / 2)  # an amount not said counts


@pytest.mark.parametrize(
    ("hypothesis", "expected"),
    [("the cat sat", 0.25), ("the cat sat down now", 0.25), ("a dog sat down", 0.5), ("", 1.0)],
)
def test_substitutions_insertions_and_deletions_count_against_the_reference(hypothesis, expected):
    assert word_error_rate("the cat sat down", hypothesis) == pytest.approx(expected)


def test_resampling_to_16k_keeps_duration():
    assert len(to_16k(np.zeros(22050, np.float32), 22050)) == 16000


def test_silence_transcribes_to_nothing_like_the_reference():
    heard = transcribe(np.zeros(16000 * 2, np.float32), 16000)
    assert word_error_rate("please call stella", heard) == 1.0
