"""VoxCPM1LM: everything of VoxCPM 1.x but the AudioVAE, behind VoxCPM2LM's batched-inference API
(`prefill`, `decode_patch`, `stop_logits`, `advance`), so the batching engine drives either unchanged.

It is VoxCPM2LM with three differences: the residual LM's input is the base LM's output plus the patch
embedding (VoxCPM2 concatenates them through `fusion_concat_proj`), the LocDiT's conditioning is the sum
of the two LM projections (VoxCPM2: both, as two tokens) and the LocDiT is V1. Parameter names are the
official ones, so an official state_dict (minus `audio_vae.*`) loads unchanged.
"""

from __future__ import annotations

import torch

from polyvox.models.voxcpm2.cfm import UnifiedCFM
from polyvox.models.voxcpm2.model import VoxCPM2LM

from .config import VoxCPM1Config
from .locdit import LocDiTV1


class VoxCPM1LM(VoxCPM2LM):
    config: VoxCPM1Config

    def __init__(self, config: VoxCPM1Config) -> None:
        super().__init__(config)
        del self.fusion_concat_proj
        self.feat_decoder = UnifiedCFM(LocDiTV1(config.local_config(config.dit_config), config.feat_dim))

    def residual_input(self, lm_out: torch.Tensor, feat_embed: torch.Tensor) -> torch.Tensor:
        return lm_out + feat_embed

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_to_dit_proj(lm_hidden) + self.res_to_dit_proj(residual_hidden)
