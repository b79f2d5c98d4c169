"""LocDiT V2's window: VoxCPM2's LocDiT (`models/layers/locdit.py`) takes the conditioning from both LMs
as tokens of their own, then the time, then the previous patch."""

from __future__ import annotations

import torch


def v2_window(
    mu_tokens: torch.Tensor, time: torch.Tensor, cond_tokens: torch.Tensor, rows: int
) -> list[torch.Tensor]:
    """VoxCPM2's: the conditioning tokens, the time as a token of its own, the previous patch."""
    return [mu_tokens, time.unsqueeze(1).expand(rows, 1, -1), cond_tokens]
