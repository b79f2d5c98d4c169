"""`VoxCPM2`: a loaded VoxCPM2 (its config, LM and AudioVAE classes, its random configs) and its prompts:
zero-shot, voice design, reference cloning, continuation of a transcribed clip, and both."""

from __future__ import annotations

from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.loaded_model import AudioInput, LoadedModel, collapse_whitespace
from polyvox.models.prompt import Prompt, build_prompt
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.voxcpm2.config import VoxCPM2Config, config_for
from polyvox.models.voxcpm2.model import VoxCPM2LM

__all__ = ["AudioInput", "VoxCPM2"]


class VoxCPM2(LoadedModel):
    config_class = VoxCPM2Config
    lm_class = VoxCPM2LM

    @staticmethod
    def make_vae(config: SpeechConfig) -> AudioVAE:
        return AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config))

    @classmethod
    def default_config(cls, size: str) -> VoxCPM2Config:
        return config_for(size)

    @property
    def arch(self) -> str:
        return "voxcpm2"

    def build_prompt(
        self,
        text: str,
        *,
        instructions: str | None = None,
        reference: AudioInput | None = None,
        prompt_text: str | None = None,
        prompt_audio: AudioInput | None = None,
    ) -> Prompt:
        return build_prompt(
            self.tokenizer,
            collapse_whitespace(text),
            patch_size=self.config.patch_size,
            feat_dim=self.config.feat_dim,
            description=instructions,
            reference=self._feats(reference, "right"),
            prompt_text=prompt_text,
            prompt_audio=self._feats(prompt_audio, "left"),
        )
