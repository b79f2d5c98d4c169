"""Subtitles from an answer's timings: SubRip (`srt`) and WebVTT (`vtt`) cues, one per piece (a
sentence), or one per word when asked."""

from __future__ import annotations

from collections.abc import Sequence

from polyvox.alignment.timeline import PieceTiming

SUBTITLE_TYPES = {"srt": "application/x-subrip", "vtt": "text/vtt"}


def _stamp(seconds: float, decimal: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def cues(pieces: Sequence[PieceTiming], per_word: bool) -> list[tuple[float, float, str]]:
    """(start, end, text) of each cue: each piece, or each word of every piece."""
    if per_word:
        return [(w.start, w.end, w.word) for piece in pieces for w in piece.words]
    return [(piece.start, piece.end, piece.text) for piece in pieces if piece.text]


def subtitles(pieces: Sequence[PieceTiming], fmt: str, per_word: bool = False) -> str:
    """The cues as a SubRip (`srt`) or WebVTT (`vtt`) file."""
    lines = ["WEBVTT", ""] if fmt == "vtt" else []
    decimal = "." if fmt == "vtt" else ","
    for number, (start, end, text) in enumerate(cues(pieces, per_word), start=1):
        if fmt == "srt":
            lines.append(str(number))
        lines.append(f"{_stamp(start, decimal)} --> {_stamp(end, decimal)}")
        lines.extend([text, ""])
    return "\n".join(lines)
