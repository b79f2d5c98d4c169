"""CTC forced alignment in numpy: the best path of a known token sequence through a CTC model's
per-frame log-probabilities (Viterbi over the sequence with a blank between and around its tokens),
and the frames each token holds on it.

Written here rather than taken from a library: `torchaudio.functional.forced_align` was removed in
torchaudio 2.9, and `ctc-forced-aligner` is built on torchaudio; the algorithm is twenty lines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

STAY, STEP, SKIP = 0, 1, 2  # how the path reached a state from the frame before: same, previous, two back


def forced_align(log_probs: np.ndarray, targets: Sequence[int], blank: int) -> np.ndarray | None:
    """For each of `targets` (token ids), the frames `[first, last + 1)` it holds on the most likely
    CTC path that spells exactly `targets` through `log_probs` (frames x vocabulary), as an array of
    shape (len(targets), 2); None when the frames are too few to spell them (CTC needs a blank between
    two equal tokens in a row)."""
    frames = log_probs.shape[0]
    if not targets:
        return np.zeros((0, 2), dtype=np.int64)
    if frames == 0:
        return None
    # the states: blank, t0, blank, t1, ..., blank; a token state may be entered from two back (over
    # the blank) unless it repeats the token there
    states = np.full(2 * len(targets) + 1, blank, dtype=np.int64)
    states[1::2] = targets
    can_skip = np.zeros(len(states), dtype=bool)
    can_skip[2:] = (states[2:] != blank) & (states[2:] != states[:-2])

    score = np.full(len(states), -np.inf)
    score[:2] = log_probs[0, states[:2]]
    came_from = np.zeros((frames, len(states)), dtype=np.int8)
    for t in range(1, frames):
        step = np.concatenate([[-np.inf], score[:-1]])
        skip = np.where(can_skip, np.concatenate([[-np.inf, -np.inf], score[:-2]]), -np.inf)
        options = np.stack([score, step, skip])
        came_from[t] = np.argmax(options, axis=0)
        score = options[came_from[t], np.arange(len(states))] + log_probs[t, states]

    # the path ends on the last token or the blank after it
    last = len(states) - 1 if len(states) == 1 or score[-1] >= score[-2] else len(states) - 2
    if not np.isfinite(score[last]):
        return None
    path = np.empty(frames, dtype=np.int64)
    state = last
    for t in range(frames - 1, -1, -1):
        path[t] = state
        state -= int(came_from[t, state])
    spans = np.empty((len(targets), 2), dtype=np.int64)
    for j in range(len(targets)):
        held = np.flatnonzero(path == 2 * j + 1)
        spans[j] = held[0], held[-1] + 1
    return spans
