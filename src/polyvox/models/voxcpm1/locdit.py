"""LocDiT V1: VoxCPM 1.x's velocity estimator. Its window is [conditioning + time, previous patch, noisy
patch]: the LMs' conditioning (one token, the sum of both projections) is added to the time embedding
instead of taking tokens of its own as in V2."""

from __future__ import annotations

import torch

from polyvox.models.voxcpm2.locdit import Condition, LocDiT, sinusoidal_embedding


class LocDiTV1(LocDiT):
    def velocity(self, x: torch.Tensor, t: torch.Tensor, condition: Condition) -> torch.Tensor:
        mu_tokens, cond_tokens, dt_embed = condition
        x = self.in_proj(x.transpose(1, 2))
        time = self.time_mlp(sinusoidal_embedding(t, self.hidden_size).to(x.dtype)) + dt_embed
        first = mu_tokens + time.unsqueeze(1)  # [N, 1, hidden]
        hidden = self.decoder(torch.cat([first, cond_tokens, x], dim=1))
        return self.out_proj(hidden[:, 1 + cond_tokens.shape[1] :]).transpose(1, 2)
