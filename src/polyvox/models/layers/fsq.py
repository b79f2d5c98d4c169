"""Finite scalar quantisation of the base LM's hidden state at audio positions."""

from __future__ import annotations

import torch
from torch import nn


class ScalarQuantizationLayer(nn.Module):
    """hidden -> latent (tanh, rounded to multiples of 1/scale) -> hidden."""

    def __init__(self, in_dim: int, out_dim: int, latent_dim: int, scale: int) -> None:
        super().__init__()
        self.scale = scale
        self.in_proj = nn.Linear(in_dim, latent_dim)
        self.out_proj = nn.Linear(latent_dim, out_dim)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        latent = torch.tanh(self.in_proj(hidden))
        return self.out_proj(torch.round(latent * self.scale) / self.scale)
