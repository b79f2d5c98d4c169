"""The forced aligners: where each spoken word of one piece of generated audio is heard (`Aligner`,
`Span`), and `make_aligner`, which builds the one the `aligner` setting names: `estimate` (the piece's
length shared out by spoken length), `pocketsphinx` (English, offline) or a CTC model (wav2vec2 / MMS)
from a directory or hub id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from polyvox.runtime.startup import StartupError


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


ESTIMATE = "estimate"
POCKETSPHINX = "pocketsphinx"


def make_aligner(spec: str, *, device: str = "cpu") -> Aligner:
    """The aligner `spec` names: "estimate", "pocketsphinx", or else a CTC model's directory or hub id,
    run on `device` (a torch device, or "auto": CUDA when there is one). Raises `StartupError` (one line
    a person reads) when it cannot be built."""
    spec = spec.strip()
    if not spec:
        raise StartupError("aligner is empty: name 'estimate', 'pocketsphinx' or a CTC model")
    if spec == ESTIMATE:
        from polyvox.alignment.aligners.estimate import EstimateAligner

        return EstimateAligner()
    if spec == POCKETSPHINX:
        from polyvox.alignment.aligners.sphinx import SphinxAligner

        return SphinxAligner.load()
    from polyvox.alignment.aligners.ctc import CtcAligner

    return CtcAligner.load(spec, device=device)
