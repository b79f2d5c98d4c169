"""Pitch shift at an unchanged tempo, spelled as FFmpeg filters for the chain `stretch.py` runs.

FFmpeg's `rubberband` filter shifts pitch alone where the FFmpeg in use was built with it (PyAV's
bundled one is not); otherwise the audio is declared faster (`asetrate`: pitch and tempo both up by
the ratio), resampled back to its rate (`aresample`), and the tempo restored by the `atempo` stages
that also apply the speed (a tempo factor the caller multiplies in).
"""

from __future__ import annotations

import av.filter

MAX_SEMITONES = 12.0

Filter = tuple[str, dict[str, str]]


def pitch_ratio(semitones: float) -> float:
    """The frequency ratio of `semitones` (equal temperament): 2 ** (n / 12)."""
    return float(2.0 ** (semitones / 12.0))


def pitch_filters(sample_rate: int, semitones: float) -> tuple[list[Filter], float]:
    """(the filters that raise the pitch by `semitones`, the factor they speed the audio up by): the
    caller's `atempo` divides its speed by that factor, so the tempo is the speed asked."""
    if not -MAX_SEMITONES <= semitones <= MAX_SEMITONES:
        raise ValueError(f"pitch must be between -{MAX_SEMITONES:g} and {MAX_SEMITONES:g} semitones")
    if semitones == 0:
        return [], 1.0
    if "rubberband" in av.filter.filters_available:
        return [("rubberband", {"pitch": f"{pitch_ratio(semitones):.6f}"})], 1.0
    shifted = round(sample_rate * pitch_ratio(semitones))  # asetrate takes a whole rate
    filters = [
        ("asetrate", {"sample_rate": str(shifted)}),
        ("aresample", {"sample_rate": str(sample_rate)}),
    ]
    return filters, shifted / sample_rate
