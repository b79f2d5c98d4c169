"""LocDiT: the velocity estimator of the flow-matching patch decoder.

Its window is the tokens in front, in the order the family's `window` gives them (VoxCPM2's:
`models/voxcpm2/locdit.py`; VoxCPM 1.x's: `models/voxcpm1/locdit.py`), then the noisy patch; the
velocity is read from the noisy-patch positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from polyvox.models.speech_config import LMConfig

from .local_transformer import LocalTransformer

# (conditioning tokens [N, k, hidden], previous-patch tokens [N, P', hidden], dt embedding [N|1, hidden])
Condition = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
# (conditioning tokens, time embedding [N|1, hidden], previous-patch tokens, rows N) -> the tokens in
# front of the noisy patch, in order
Window = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], list[torch.Tensor]]


def sinusoidal_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """`t [N]` -> `[N, dim]` (sin half, then cos half), in `t`'s dtype."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=t.dtype, device=t.device) * -(math.log(10000) / (half - 1)))
    arg = scale * t.unsqueeze(1) * freq.unsqueeze(0)
    return torch.cat((arg.sin(), arg.cos()), dim=-1)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, dim, bias=True)
        self.linear_2 = nn.Linear(dim, dim, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(nn.functional.silu(self.linear_1(x)))


class LocDiT(nn.Module):
    def __init__(self, config: LMConfig, in_channels: int, window: Window) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.hidden_size = hidden
        self.window = window
        self.in_proj = nn.Linear(in_channels, hidden, bias=True)
        self.cond_proj = nn.Linear(in_channels, hidden, bias=True)
        self.out_proj = nn.Linear(hidden, in_channels, bias=True)
        self.time_mlp = TimestepEmbedding(hidden, hidden)
        self.delta_time_mlp = TimestepEmbedding(hidden, hidden)
        self.decoder = LocalTransformer(config)

    def forward(
        self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, cond: torch.Tensor, dt: torch.Tensor
    ) -> torch.Tensor:
        """Velocity `[N, D, P]` of noisy patches `x [N, D, P]` at times `t [N]`.

        `mu [N, k*hidden]` is the conditioning (k tokens), `cond [N, D, P']` the previous patch.
        """
        return self.velocity(x, t, self.condition(mu, cond, dt))

    def condition(self, mu: torch.Tensor, cond: torch.Tensor, dt: torch.Tensor) -> Condition:
        """What stays fixed through a solve, computed once for all its steps: the conditioning
        tokens, the projected previous patch and the step-size embedding (`dt [N]` or `[1]`)."""
        cond_tokens = self.cond_proj(cond.transpose(1, 2))
        dt_embed = self.delta_time_mlp(sinusoidal_embedding(dt, self.hidden_size).to(cond_tokens.dtype))
        return mu.view(cond.shape[0], -1, self.hidden_size), cond_tokens, dt_embed

    def velocity(self, x: torch.Tensor, t: torch.Tensor, condition: Condition) -> torch.Tensor:
        """The velocity at times `t` (`[N]`, or `[1]` for one time shared by every row)."""
        mu_tokens, cond_tokens, dt_embed = condition
        x = self.in_proj(x.transpose(1, 2))
        time = self.time_mlp(sinusoidal_embedding(t, self.hidden_size).to(x.dtype)) + dt_embed
        front = self.window(mu_tokens, time, cond_tokens, x.shape[0])
        hidden = self.decoder(torch.cat([*front, x], dim=1))
        start = sum(tokens.shape[1] for tokens in front)
        return self.out_proj(hidden[:, start:]).transpose(1, 2)
