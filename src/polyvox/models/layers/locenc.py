"""LocEnc: embeds one latent patch `[P, D]` as a single vector through a CLS-style special token."""

from __future__ import annotations

import torch
from torch import nn

from polyvox.models.speech_config import LMConfig

from .local_transformer import LocalTransformer


class LocEnc(nn.Module):
    def __init__(self, config: LMConfig, input_dim: int) -> None:
        super().__init__()
        self.special_token = nn.Parameter(torch.randn(1, 1, 1, config.hidden_size))
        self.in_proj = nn.Linear(input_dim, config.hidden_size, bias=True)
        self.encoder = LocalTransformer(config)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        """`patches [N, P, D]` -> `[N, hidden]`."""
        x = self.in_proj(patches)
        special = self.special_token.view(1, 1, -1).expand(x.shape[0], 1, -1)
        return self.encoder(torch.cat([special, x], dim=1))[:, 0]
