"""LocDiT V1: VoxCPM 1.x's velocity estimator, VoxCPM2's LocDiT with V1's window: [conditioning + time,
previous patch, noisy patch]. The LMs' conditioning (one token, the sum of both projections) is added to
the time embedding instead of taking tokens of its own as in V2."""

from __future__ import annotations

import torch

from polyvox.models.layers.locdit import LocDiT
from polyvox.models.speech_config import LMConfig


def v1_window(
    mu_tokens: torch.Tensor, time: torch.Tensor, cond_tokens: torch.Tensor, rows: int
) -> list[torch.Tensor]:
    """The conditioning token plus the time embedding, then the previous patch."""
    return [mu_tokens + time.unsqueeze(1), cond_tokens]


def locdit_v1(config: LMConfig, in_channels: int) -> LocDiT:
    """LocDiT V1 (the official `VoxCPMLocDiT`): the same parameters as V2's, the window V1's."""
    return LocDiT(config, in_channels, window=v1_window)
