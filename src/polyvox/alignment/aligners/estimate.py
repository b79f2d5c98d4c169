"""The `estimate` aligner: a piece's exact duration shared among its words by spoken length (letters
and digits), after trimming the leading and trailing silence; every span is approximate. Also the
sharing rule the other aligners use for the words they cannot find (`share`, `fill_gaps`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from polyvox.alignment.aligners.span import Span

FRAME_S = 0.02
# A frame is silent below this fraction of the loud frames' level (their 90th percentile RMS): -30 dB
# sits well under speech's quiet phonemes and above a resampler's or a codec's residue.
SILENCE_RATIO = 10 ** (-30 / 20)
SILENCE_FLOOR = 1e-4  # absolute RMS under which audio counts as silence whatever its peak
EDGE_PAD_S = 0.04  # kept either side of the speech found, so a soft onset is not cut


def spoken_length(word: str) -> int:
    """How long a word takes to say, in letters and digits (punctuation is not spoken)."""
    return sum(ch.isalnum() for ch in word)


def share(words: Sequence[str], start: float, end: float) -> list[Span]:
    """`[start, end]` shared among `words` by spoken length, back to back, all approximate; a word
    with nothing to say (punctuation) gets an empty span at its place."""
    weights = np.array([spoken_length(w) for w in words], dtype=np.float64)
    if weights.sum() == 0:
        return [Span(start, start, True) for _ in words]
    edges = start + (end - start) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
    edges[-1] = end
    return [Span(float(a), float(b), True) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def fill_gaps(words: Sequence[str], found: Sequence[Span | None], duration: float) -> list[Span]:
    """`found` with each run of missing words (None) shared out between its found neighbours (the
    piece's ends where it has none)."""
    spans: list[Span] = []
    i = 0
    while i < len(found):
        span = found[i]
        if span is not None:
            spans.append(span)
            i += 1
            continue
        j = i
        while j < len(found) and found[j] is None:
            j += 1
        left = spans[-1].end if spans else 0.0
        after = found[j] if j < len(found) else None
        right = after.start if after is not None else duration
        spans.extend(share(words[i:j], left, max(left, right)))
        i = j
    return spans


def speech_bounds(samples: np.ndarray, sample_rate: int) -> tuple[float, float]:
    """Where sound starts and ends in `samples` (seconds), by frame energy; the whole piece when it is
    all silence or all equally loud (noise)."""
    duration = len(samples) / sample_rate if sample_rate > 0 else 0.0
    frame = max(1, round(FRAME_S * sample_rate))
    n = len(samples) // frame
    if n < 3:
        return 0.0, duration
    frames = np.asarray(samples[: n * frame], dtype=np.float64).reshape(n, frame)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    loud = np.flatnonzero(rms >= max(SILENCE_FLOOR, SILENCE_RATIO * np.percentile(rms, 90)))
    if loud.size == 0:
        return 0.0, duration
    start = max(0.0, loud[0] * frame / sample_rate - EDGE_PAD_S)
    end = min(duration, (loud[-1] + 1) * frame / sample_rate + EDGE_PAD_S)
    return start, max(start, end)


class EstimateAligner:
    """No model: the words of a piece laid back to back over the sound in it, by spoken length."""

    name = "estimate"

    def align(self, samples: np.ndarray, sample_rate: int, words: Sequence[str]) -> list[Span]:
        if not words:
            return []
        samples = np.nan_to_num(np.asarray(samples, dtype=np.float32).reshape(-1))
        start, end = speech_bounds(samples, sample_rate)
        return share(words, start, end)
