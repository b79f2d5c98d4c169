"""Non-causal MiniCPM4 stack over short fixed-length windows (LocEnc's and LocDiT's backbone).

Plain batched SDPA, no cache: every window `[B, L, hidden]` attends over itself, positions 0..L-1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from polyvox.models.speech_config import LMConfig

from .minicpm4 import LongRoPE, MiniCPMDecoderLayer, RMSNorm

MAX_WINDOW = 64


def _full_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True
    )
    return out.transpose(1, 2)


class LocalTransformer(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(MiniCPMDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rope_emb = None if config.no_rope else LongRoPE(config, max_positions=MAX_WINDOW)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rope = None
        if self.rope_emb is not None:
            rope = self.rope_emb.window(x.shape[1])
        for layer in self.layers:
            x = layer(x, rope, _full_attention)
        return self.norm(x)
