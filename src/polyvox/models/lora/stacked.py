"""`StackedLoRA`: the low-rank updates of every adapter slot for one linear module, applied per batch row.

For `S` slots of rank `R` (smaller ranks zero-padded) and `P` fused parts, `a` is `[P·S·R, in]` and `b`
`[out, P·S·R]` (block-diagonal over the parts, each adapter's `alpha / r` folded in). A batch row of slot
`s` keeps only its slot's `R` columns of `x @ a.T` (a 0/1 mask), so one pair of matrix multiplies serves
a batch mixing adapters, and slot 0, kept all zeros, is "no adapter"."""

from __future__ import annotations

import torch
from torch import nn


class StackedLoRA:
    def __init__(
        self,
        module: nn.Linear,
        parts: list[tuple[int, int]],
        slots: int,
        rank: int,
        storage: torch.Tensor | None = None,
    ) -> None:
        """`parts`: (first output row, width) of each part of `module`'s output, in order. `storage`: a
        flat tensor of `numel(...)` elements, reserved earlier, to hold `a` and `b` (zeroed here)."""
        weight = module.weight
        self.parts = parts
        self.slots, self.rank = slots, rank
        width = len(parts) * slots * rank
        if storage is None:
            storage = torch.empty(
                self.numel(module, len(parts), slots, rank), dtype=weight.dtype, device=weight.device
            )
        storage.zero_()
        split = width * module.in_features
        self.a = storage[:split].view(width, module.in_features)
        self.b = storage[split:].view(module.out_features, width)

    @staticmethod
    def numel(module: nn.Linear, parts: int, slots: int, rank: int) -> int:
        """Elements of `a` and `b` together."""
        return parts * slots * rank * (module.in_features + module.out_features)

    @property
    def nbytes(self) -> int:
        return self.a.nbytes + self.b.nbytes

    def _columns(self, part: int, slot: int) -> slice:
        start = (part * self.slots + slot) * self.rank
        return slice(start, start + self.rank)

    def write(self, slot: int, part: int, lora_a: torch.Tensor, lora_b: torch.Tensor, scaling: float) -> None:
        """Put one adapter's `lora_A [r, in]`, `lora_B [width, r]` for part `part` into `slot`."""
        cols, r = self._columns(part, slot), lora_a.shape[0]
        out_start, width = self.parts[part]
        self.a[cols].zero_()
        self.b[:, cols].zero_()
        self.a[cols][:r].copy_(lora_a)
        self.b[out_start : out_start + width, cols.start : cols.start + r].copy_(lora_b * scaling)

    def clear(self, slot: int) -> None:
        for part in range(len(self.parts)):
            cols = self._columns(part, slot)
            self.a[cols].zero_()
            self.b[:, cols].zero_()

    def delta(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The update for `x [rows, ..., in]` given `mask [rows, S·R]` (row r's slot columns set to 1)."""
        h = torch.nn.functional.linear(x, self.a)
        h = h.unflatten(-1, (len(self.parts), -1))
        h = h * mask.view(mask.shape[0], *([1] * (x.dim() - 2)), 1, mask.shape[1])
        return torch.nn.functional.linear(h.flatten(-2), self.b)
