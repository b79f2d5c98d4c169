"""Conditional flow-matching solver of the patch decoder: Euler steps on a sway-sampled
time grid, classifier-free guidance with CFG-Zero* (zero velocity first, optimised scale)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .locdit import LocDiT


def sway_time_span(n_timesteps: int, dtype: torch.dtype, device, coef: float = 1.0) -> torch.Tensor:
    """Times from 1 to 0, bunched towards t=1 by sway sampling."""
    t = torch.linspace(1, 0, n_timesteps + 1, device=device, dtype=dtype)
    return t + coef * (torch.cos(math.pi / 2 * t) - 1 + t)


def optimized_scale(positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """CFG-Zero* scale per row: projection of the conditional velocity on the unconditional one."""
    dot = torch.sum(positive * negative, dim=1, keepdim=True)
    return dot / (torch.sum(negative**2, dim=1, keepdim=True) + 1e-8)


class UnifiedCFM(nn.Module):
    def __init__(self, estimator: LocDiT, sway_sampling_coef: float = 1.0) -> None:
        super().__init__()
        self.estimator = estimator
        self.sway_sampling_coef = sway_sampling_coef

    def forward(
        self,
        mu: torch.Tensor,
        cond: torch.Tensor,
        noise: torch.Tensor,
        cfg_value: torch.Tensor,
        n_timesteps: int,
    ) -> torch.Tensor:
        """Solve from `noise [B, D, P]` to a patch `[B, D, P]`.

        `mu [B, C]` conditions the estimator (zeroed for the unconditional branch), `cond
        [B, D, P]` is the previous patch, `cfg_value [B]` the guidance strength per row.
        """
        batch = mu.shape[0]
        t_span = sway_time_span(n_timesteps, mu.dtype, mu.device, self.sway_sampling_coef)
        zero_steps = max(1, int(len(t_span) * 0.04))
        guidance = cfg_value.to(mu.dtype).view(batch, 1, 1)
        # the conditioned and unconditioned (mu zeroed) halves of every estimator call; what does not
        # change between steps (and the one time and step size all rows share) is computed once
        mu_in = torch.cat([mu, torch.zeros_like(mu)])
        condition = self.estimator.condition(mu_in, torch.cat([cond, cond]), mu.new_zeros(1))

        x = noise.to(mu.dtype)
        t, dt = t_span[0], t_span[0] - t_span[1]
        for step in range(1, len(t_span)):
            if step > zero_steps:
                velocity = self.estimator.velocity(torch.cat([x, x]), t.view(1), condition)
                positive, negative = velocity[:batch], velocity[batch:]
                scale = optimized_scale(positive.reshape(batch, -1), negative.reshape(batch, -1)).view(
                    batch, 1, 1
                )
                x = x - dt * (negative * scale + guidance * (positive - negative * scale))
            t = t - dt
            if step < len(t_span) - 1:
                dt = t - t_span[step + 1]
        return x
