"""A tiny random-weight VoxCPM2 (fp32, CPU) and prompts of every layout, shared by the engine tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from polyvox.engine.config import EngineConfig
from polyvox.engine.llm_engine import LLMEngine
from polyvox.models.voxcpm2.audio_in import encode_wav
from polyvox.models.voxcpm2.audio_vae import AudioVAE, AudioVAEConfig
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM


@dataclass
class Prompt:
    tokens: torch.Tensor
    text_mask: torch.Tensor
    audio_mask: torch.Tensor
    feats: torch.Tensor


@dataclass
class Tiny:
    config: VoxCPM2Config
    lm: VoxCPM2LM
    vae: AudioVAE

    def engine(self, **kw) -> LLMEngine:
        kw.setdefault("kv_block_size", 4)
        kw.setdefault("num_kv_blocks", 512)
        kw.setdefault("max_num_batched_tokens", 256)
        return LLMEngine(
            self.lm, self.vae, self.config, EngineConfig(**kw), torch.device("cpu"), torch.float32
        )

    def text(self, n: int, offset: int = 0) -> torch.Tensor:
        return torch.arange(110 + offset, 110 + offset + n) % 280 + 10

    def zero_shot(self, n: int, offset: int = 0) -> Prompt:
        tokens = torch.cat([self.text(n, offset), torch.tensor([101])])
        t = len(tokens)
        return Prompt(
            tokens,
            torch.ones(t),
            torch.zeros(t),
            torch.zeros(t, self.config.patch_size, self.config.feat_dim),
        )

    def reference(self, n: int, ref_patches: torch.Tensor, offset: int = 0) -> Prompt:
        """`[103, ref-audio…, 104, text…, 101]`: reference cloning."""
        r, text = len(ref_patches), self.zero_shot(n, offset)
        tokens = torch.cat(
            [torch.tensor([103]), torch.zeros(r, dtype=torch.long), torch.tensor([104]), text.tokens]
        )
        zero = torch.zeros(1, *ref_patches.shape[1:])
        feats = torch.cat([zero, ref_patches, zero, text.feats])
        audio = torch.cat([torch.zeros(1), torch.ones(r), torch.zeros(1), text.audio_mask])
        return Prompt(tokens, 1 - audio, audio, feats)

    def continuation(self, n: int, prompt_patches: torch.Tensor, offset: int = 0) -> Prompt:
        """`[text…, 101, prompt-audio…]`: continuation of a prompt recording."""
        text, p = self.zero_shot(n, offset), len(prompt_patches)
        tokens = torch.cat([text.tokens, torch.zeros(p, dtype=torch.long)])
        audio = torch.cat([text.audio_mask, torch.ones(p)])
        return Prompt(tokens, 1 - audio, audio, torch.cat([text.feats, prompt_patches]))

    def clip_patches(self, seconds: float, freq: float = 220.0) -> torch.Tensor:
        """A real VAE encoding of a tone, as the server encodes a reference clip."""
        t = np.arange(int(seconds * self.vae.sample_rate)) / self.vae.sample_rate
        wav = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
        return encode_wav(self.vae, wav, self.config.patch_size)


@pytest.fixture(scope="session")
def tiny() -> Tiny:
    torch.manual_seed(1234)
    config = VoxCPM2Config.tiny()
    lm = VoxCPM2LM(config)
    with torch.no_grad():
        for p in lm.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config))
    return Tiny(config, lm.eval(), vae.eval())
