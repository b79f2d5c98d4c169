"""The forced aligners: where each spoken word of one piece of generated audio is heard (`Aligner`,
`Span`), and `make_aligner`, which builds the one the `aligner` setting names: `estimate` (the piece's
length shared out by spoken length), `pocketsphinx` (English, offline) or a CTC model (wav2vec2 / MMS)
from a directory or hub id."""

from __future__ import annotations

from polyvox.alignment.aligners.span import Aligner, Span
from polyvox.runtime.startup import StartupError

__all__ = ["ESTIMATE", "POCKETSPHINX", "Aligner", "Span", "make_aligner"]

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
