"""VoxCPM2LM: VoxCPM2 but the AudioVAE, a `SpeechLM` (models/speech_lm.py) with VoxCPM2's fusions: the
residual LM's input is `fusion_concat_proj` of the base LM's output and the patch embedding, and the
LocDiT takes both LM projections as two conditioning tokens (LocDiT V2's window)."""

from __future__ import annotations

import torch
from torch import nn

from polyvox.models.speech_lm import SpeechLM

from .locdit import v2_window


class VoxCPM2LM(SpeechLM):
    lora_default_proj = ["enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj", "fusion_concat_proj"]
    dit_window = staticmethod(v2_window)
    fusion_concat_proj: nn.Linear

    def fusion_layers(self, hidden: int) -> dict[str, nn.Module]:
        return {"fusion_concat_proj": nn.Linear(2 * hidden, hidden)}

    def residual_input(self, lm_out: torch.Tensor, feat_embed: torch.Tensor) -> torch.Tensor:
        return self.fusion_concat_proj(torch.cat((lm_out, feat_embed), dim=-1))

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        """Both LMs' projections side by side (two LocDiT tokens)."""
        return torch.cat((self.lm_to_dit_proj(lm_hidden), self.res_to_dit_proj(residual_hidden)), dim=-1)
