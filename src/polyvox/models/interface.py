"""The seam between the engine and the model families: the engine (engine/, core/) imports no family, not
even through another module (`lint-imports` checks it); it reaches a model's parts through this module,
and otherwise only what names no family (the registry's lookups in `architectures.py`, which import a
family on first use, `model_source.py`, `lora/`), so a new family is a folder and a registration.
`SpeechModel` is what the engine asks of a loaded model, of any family: its parts for the engine core
(config, LM, AudioVAE, where it runs), its prompts (`build_prompt`, with a voice clip encoded by
`encode_clip`), its length cap, and what it is (`arch`, its rates). Every family's `LoadedModel` is one.
The rest are the parts every family is built of (`layers/` and the shared modules beside this one), as
the engine core drives them: `SpeechLM` (the step methods) and `SpeechConfig`, the AudioVAE and its
streaming state, the paged KV cache and attention metadata, host-to-device copies, the device a model
runs on (`resolve_device`); `Prompt` is the prompt every family builds, `Padding` the side a clip is
padded on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch

from polyvox.models.audio_in import Padding
from polyvox.models.checkpoint import resolve_device
from polyvox.models.host_to_device import copy_from_host, device_tensor, to_device
from polyvox.models.layers.attention import AttentionMetadata, compare_backends, use_backend
from polyvox.models.layers.audio_vae import AudioVAE, StreamState
from polyvox.models.layers.kv_cache import PagedKVCache
from polyvox.models.prompt import Prompt
from polyvox.models.speech_config import LMConfig, SpeechConfig
from polyvox.models.speech_lm import SpeechLM

if TYPE_CHECKING:
    import numpy as np

    from polyvox.models.tokenizer import TextTokenizer

__all__ = [
    "AttentionMetadata",
    "AudioVAE",
    "LMConfig",
    "PagedKVCache",
    "Padding",
    "Prompt",
    "SpeechConfig",
    "SpeechLM",
    "SpeechModel",
    "StreamState",
    "compare_backends",
    "copy_from_host",
    "device_tensor",
    "resolve_device",
    "to_device",
    "use_backend",
]


class SpeechModel(Protocol):
    config: SpeechConfig  # the fields every family's config has
    tokenizer: TextTokenizer
    lm: SpeechLM  # every family's LM: the step methods (prefill, decode_patch, advance...)
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
