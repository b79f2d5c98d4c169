"""What every forced aligner is and gives: `Span` (one word's time in a piece of audio) and the
`Aligner` protocol. A module of its own so the aligners and the package's `make_aligner` both import it
without importing each other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Span:
    """One word's time in seconds from the piece's first sample; `approximate`: shared out by spoken
    length, not found in the audio."""

    start: float
    end: float
    approximate: bool


class Aligner(Protocol):
    """Blocking (callers run it in a worker thread). `align` returns one `Span` per word of `words`
    (the piece's text as the engine spoke it, split on whitespace), in order, non-overlapping, within
    the audio; it never raises for odd audio (silence, noise): words it cannot find are estimated."""

    name: str

    def align(self, samples: np.ndarray, sample_rate: int, words: Sequence[str]) -> list[Span]: ...
