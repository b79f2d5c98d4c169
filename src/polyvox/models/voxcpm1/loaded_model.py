"""`VoxCPM1`: a loaded VoxCPM 1.x model (VoxCPM-0.5B or VoxCPM 1.5): its config, LM and AudioVAE classes
and the prompt modes VoxCPM 1.x has, zero-shot and continuation from a transcribed clip. It has no
voice design and no isolated reference cloning. What every family's loaded model does (load, check,
random weights, batch-1 synthesis) is `LoadedModel`'s."""

from __future__ import annotations

import os

import torch

from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.loaded_model import AudioInput, LoadedModel, collapse_whitespace
from polyvox.models.prompt import Prompt, build_prompt
from polyvox.models.speech_config import SpeechConfig

from .audio_vae import audio_vae_v1
from .config import Variant, VoxCPM1Config, v1_config
from .model import VoxCPM1LM

# The official 1.x loop keeps the last (3 - 1) prompt patches to prime the decoder with (VoxCPM2: 4).
STREAMING_PREFIX_LEN = 3


class PromptModeUnsupported(ValueError):
    """A prompt mode (voice design, reference cloning) the model does not have."""


class VoxCPM1(LoadedModel):
    config: VoxCPM1Config
    config_class = VoxCPM1Config
    lm_class = VoxCPM1LM

    @staticmethod
    def make_vae(config: SpeechConfig) -> AudioVAE:
        assert isinstance(config, VoxCPM1Config)
        return audio_vae_v1(config.vae_config)

    @classmethod
    def default_config(cls, size: str) -> VoxCPM1Config:
        return v1_config("voxcpm1.5", size)

    @property
    def arch(self) -> str:
        return self.config.variant

    @classmethod
    def random(
        cls,
        size: str = "tiny",
        device: str | torch.device | None = "auto",
        dtype: str | torch.dtype | None = "auto",
        seed: int = 0,
        tokenizer_dir: str | os.PathLike | None = None,
        config: SpeechConfig | None = None,
        variant: Variant = "voxcpm1.5",
    ) -> VoxCPM1:
        model = super().random(size, device, dtype, seed, tokenizer_dir, config or v1_config(variant, size))
        assert isinstance(model, VoxCPM1)
        return model

    def build_prompt(
        self,
        text: str,
        *,
        instructions: str | None = None,
        reference: AudioInput | None = None,
        prompt_text: str | None = None,
        prompt_audio: AudioInput | None = None,
    ) -> Prompt:
        """Zero-shot, or (`prompt_text` + `prompt_audio`) continuing a transcribed clip."""
        if instructions:
            raise PromptModeUnsupported(f"{self.arch} has no voice design (instructions)")
        if reference is not None:
            raise PromptModeUnsupported(
                f"{self.arch} clones only by continuing a transcribed clip (prompt_text + prompt_audio)"
            )
        return build_prompt(
            self.tokenizer,
            collapse_whitespace(text),
            patch_size=self.config.patch_size,
            feat_dim=self.config.feat_dim,
            prompt_text=prompt_text,
            prompt_audio=self._feats(prompt_audio, "left"),
            streaming_prefix_len=STREAMING_PREFIX_LEN,
        )
