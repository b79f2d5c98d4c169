"""`SpeechModel`: what the engine asks of a loaded model, of any family: its parts for the batching core
(config, LM, AudioVAE, where it runs), its prompts (`build_prompt`, with a voice clip encoded by
`encode_clip`), its length cap, and what it is (`arch`, its rates). Every family's `LoadedModel` is
one; the engine (engine_core/) names no family. `Prompt` is the prompt every family builds, `Padding`
the side a clip is padded on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from polyvox.models.voxcpm2.audio_in import Padding
from polyvox.models.voxcpm2.prompt import Prompt

if TYPE_CHECKING:
    import numpy as np

    from polyvox.models.voxcpm2.audio_vae import AudioVAE
    from polyvox.models.voxcpm2.config import VoxCPM2Config
    from polyvox.models.voxcpm2.model import VoxCPM2LM
    from polyvox.models.voxcpm2.tokenizer import VoxCPM2Tokenizer

__all__ = ["Padding", "Prompt", "SpeechModel"]


class SpeechModel(Protocol):
    config: VoxCPM2Config  # every family's config has VoxCPM2's fields
    tokenizer: VoxCPM2Tokenizer
    lm: VoxCPM2LM  # every family's LM has VoxCPM2's step methods (prefill, decode_patch, advance...)
    vae: AudioVAE

    @property
    def arch(self) -> str:
        """The release, as `--arch` and `/v1/models` spell it."""
        ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def sample_rate(self) -> int:
        """The rate of the audio it makes."""
        ...

    @property
    def reference_rate(self) -> int:
        """The rate `encode_clip` takes a voice clip at."""
        ...

    def build_prompt(
        self,
        text: str,
        *,
        instructions: str | None = None,
        reference: torch.Tensor | None = None,
        prompt_text: str | None = None,
        prompt_audio: torch.Tensor | None = None,
    ) -> Prompt:
        """The prompt of `text`: `instructions` design a voice, `reference` (latent patches) clones one,
        `prompt_text` + `prompt_audio` continue a transcribed clip; ValueError for a mode the family
        does not have."""
        ...

    def encode_clip(self, samples: np.ndarray, padding: Padding = "right") -> torch.Tensor:
        """Mono float32 samples at `reference_rate` -> latent patches [T, P, D]."""
        ...

    def capped_max_len(self, prompt: Prompt, max_len: int) -> int:
        """The most patches to make for `prompt`, `max_len` at most."""
        ...
