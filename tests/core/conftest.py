"""A tiny random-weight VoxCPM2 (fp32, CPU) and prompts of every layout, shared by the engine tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams
from polyvox.models.audio_in import encode_wav
from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.prompt import Prompt, build_prompt
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM


def tokenize(text: str) -> list[int]:
    """Stand-in tokenizer for the tiny vocabulary: one id per character."""
    return [110 + ord(c) % 180 for c in text]


@dataclass
class Tiny:
    config: VoxCPM2Config
    lm: VoxCPM2LM
    vae: AudioVAE

    def core(self, **kw) -> EngineCore:
        kw.setdefault("kv_block_size", 4)
        kw.setdefault("num_kv_blocks", 512)
        kw.setdefault("max_num_batched_tokens", 256)
        config = BatchingConfig(**kw)
        return EngineCore(self.lm, self.vae, self.config, config, torch.device("cpu"), torch.float32)

    def prompt(self, text: str, **kw) -> Prompt:
        """Any layout: `description=` designs, `reference=` clones, `prompt_text`+`prompt_audio` continues."""
        return build_prompt(
            tokenize, text, patch_size=self.config.patch_size, feat_dim=self.config.feat_dim, **kw
        )

    def clip_patches(self, seconds: float, freq: float = 220.0) -> torch.Tensor:
        """A real VAE encoding of a tone, as the server encodes a reference clip."""
        t = np.arange(int(seconds * self.vae.sample_rate)) / self.vae.sample_rate
        wav = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
        return encode_wav(self.vae, wav, self.config.patch_size)


def _merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    nested = {k: _merged(base[k], v) for k, v in changes.items() if isinstance(v, dict) and k in base}
    return {**base, **changes, **nested}


def make_tiny(lm: dict[str, Any] | None = None, vae: dict[str, Any] | None = None) -> Tiny:
    """The tiny config with seeded random weights; `lm` and `vae` change fields of the LM's and the
    AudioVAE's config (nested dicts change only the fields they name)."""
    torch.manual_seed(1234)
    config = VoxCPM2Config.tiny()
    if lm or vae:
        data = config.model_dump()
        data["lm_config"] = _merged(data["lm_config"], lm or {})
        data["audio_vae_config"] = _merged(data["audio_vae_config"], vae or {})
        config = VoxCPM2Config.model_validate(data)
    model = VoxCPM2LM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    audio_vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config))
    return Tiny(config, model.eval(), audio_vae.eval())


@pytest.fixture(scope="session")
def tiny() -> Tiny:
    return make_tiny()


@pytest.fixture(scope="session")
def tiny_with() -> Callable[..., Tiny]:
    """`make_tiny` itself, for a test that needs the tiny model with other config fields."""
    return make_tiny


def mixed_requests(tiny):
    ref = tiny.clip_patches(0.64)
    other = tiny.clip_patches(0.48, freq=330.0)
    p = tiny.prompt
    return [
        (p("Hello there, friend."), SamplingParams(seed=1, min_len=9, max_len=9)),
        (
            p("Short.", description="a calm old man"),
            SamplingParams(seed=2, min_len=4, max_len=4, cfg_value=3.0),
        ),
        (p("Cloned voice here.", reference=ref), SamplingParams(seed=3, min_len=7, max_len=7)),
        (
            p("A longer sentence to clone.", reference=ref),
            SamplingParams(seed=4, min_len=11, max_len=11, cfg_value=1.5),
        ),
        (
            p("and then", prompt_text="So it began ", prompt_audio=other),
            SamplingParams(seed=5, max_len=6, inference_timesteps=5),
        ),
        (
            p("The quick brown fox jumps over it."),
            SamplingParams(seed=6, min_len=8, max_len=8, temperature=0.7),
        ),
        (
            p("Both.", reference=ref, prompt_text="Yes ", prompt_audio=other),
            SamplingParams(seed=7, min_len=5, max_len=5),
        ),
        (p("Nine patches or a stop."), SamplingParams(seed=8, max_len=10, inference_timesteps=4)),
    ]


@pytest.fixture(scope="module")
def mixed(tiny):
    """The mixed requests and each one's output when it runs alone in an engine."""
    requests = mixed_requests(tiny)
    return requests, [tiny.core().generate([p], [sp])[0] for p, sp in requests]
