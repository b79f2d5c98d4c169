"""Every request's initial CFM noise, drawn ahead from its own seeded generator into one host tensor
indexed by slot, so a step takes the whole batch's noise with one gather instead of a tensor per row.

A request's noise is its generator's stream, one `[1, D, P]` patch after another, whatever the batch
(what makes a seeded request's audio the same in any batch). Drawn `NOISE_BLOCK` patches at a time
(one op instead of one per step) where that gives the same numbers: PyTorch's CPU normal sampler
works in blocks of 16 values, so when `D * P` is a multiple of 16 one draw of K patches is K draws of
one. A request's first draw is shorter by its sequence id, so requests that arrive together do not
all draw again in the same step.
"""

from __future__ import annotations

import numpy as np
import torch

from polyvox.core.sequence import Sequence

NOISE_BLOCK = 32  # patches of CFM noise drawn at once per request


class NoiseBank:
    def __init__(self, feat_dim: int, patch_size: int, capacity: int = 8) -> None:
        self.feat_dim, self.patch_size = feat_dim, patch_size
        self.block = NOISE_BLOCK if feat_dim * patch_size % 16 == 0 else 1
        self.noise = torch.empty(0, self.block, feat_dim, patch_size)  # [slots, K, D, P]
        self.next = np.zeros(0, dtype=np.int64)  # each slot's next patch in its block
        self.drawn = np.zeros(0, dtype=np.int64)  # patches in its block (0: none drawn yet)
        self.free: list[int] = []
        self._grow(capacity)

    def acquire(self) -> int:
        """A slot for a new request (nothing drawn yet); the bank doubles when it is full."""
        if not self.free:
            self._grow(len(self.next))
        slot = self.free.pop()
        self.next[slot] = self.drawn[slot] = 0
        return slot

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def take(self, seqs: list[Sequence], slots: np.ndarray) -> torch.Tensor:
        """The next noise `[B, D, P]` of each sequence, `slots` their slots in order; a sequence whose
        block is used up draws its next one first (a few rows a step: the rest is one gather)."""
        cursor = self.next[slots]
        for row in np.flatnonzero(cursor == self.drawn[slots]).tolist():
            self._draw(seqs[row], int(slots[row]))
            cursor[row] = 0
        self.next[slots] = cursor + 1
        flat = torch.from_numpy(slots * self.block + cursor)  # rows of the bank seen as [slots * K, D, P]
        return self.noise.view(-1, self.feat_dim, self.patch_size).index_select(0, flat)

    def _draw(self, seq: Sequence, slot: int) -> None:
        block = self.block
        if not seq.patches and block > 1:
            block = 1 + seq.seq_id % block
        shape = (block, self.feat_dim, self.patch_size)
        self.noise[slot, :block] = torch.randn(shape, generator=seq.generator)
        self.drawn[slot] = block

    def _grow(self, extra: int) -> None:
        rows = len(self.next)
        self.noise = torch.cat([self.noise, torch.empty(extra, *self.noise.shape[1:])])
        self.next = np.concatenate([self.next, np.zeros(extra, dtype=np.int64)])
        self.drawn = np.concatenate([self.drawn, np.zeros(extra, dtype=np.int64)])
        self.free.extend(range(rows + extra - 1, rows - 1, -1))
