"""VoxCPM1LM: VoxCPM 1.x but the AudioVAE, a `SpeechLM` (models/speech_lm.py, built of models/layers/)
with V1's fusions, so the batching engine drives it as it drives VoxCPM2LM: the residual LM's input is the
base LM's output plus the patch embedding (no fusion layer), the LocDiT's conditioning is the sum of the
two LM projections, added to its time embedding (LocDiT V1's window). Parameter names are the official
ones, so an official state_dict (minus `audio_vae.*`) loads unchanged.
"""

from __future__ import annotations

import torch

from polyvox.models.speech_lm import SpeechLM

from .config import VoxCPM1Config
from .locdit import v1_window


class VoxCPM1LM(SpeechLM):
    # As VoxCPM2's (the official LoRAConfig's default): V1 has no fusion_concat_proj to adapt.
    lora_default_proj = ["enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj", "fusion_concat_proj"]
    dit_window = staticmethod(v1_window)
    config: VoxCPM1Config

    def residual_input(self, lm_out: torch.Tensor, feat_embed: torch.Tensor) -> torch.Tensor:
        return lm_out + feat_embed

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_to_dit_proj(lm_hidden) + self.res_to_dit_proj(residual_hidden)
