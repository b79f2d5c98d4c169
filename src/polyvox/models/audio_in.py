"""Prompt audio in: bytes of any common format -> 16 kHz mono -> padded to whole patches -> VAE latent
patches [T, P, D], as the official `_encode_wav` does (right padding for a reference, left for a
continuation prompt)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

from polyvox.audio.decode import decode_audio
from polyvox.models.layers.audio_vae import AudioVAE

Padding = Literal["right", "left"]


def encode_wav(
    vae: AudioVAE, wav: np.ndarray | torch.Tensor, patch_size: int, padding: Padding = "right"
) -> torch.Tensor:
    """Mono samples at `vae.sample_rate` -> latent patches [T, P, D] (float32, on the CPU)."""
    wav = torch.as_tensor(np.asarray(wav, dtype=np.float32) if isinstance(wav, np.ndarray) else wav)
    wav = wav.float().reshape(1, -1)
    pad = -wav.shape[-1] % (patch_size * vae.chunk_size)
    wav = F.pad(wav, (pad, 0) if padding == "left" else (0, pad))
    device = next(vae.parameters()).device
    latents = vae.encode(wav.to(device)).float().cpu()
    return latents.view(vae.latent_dim, -1, patch_size).permute(1, 2, 0).contiguous()


def encode_audio_bytes(
    vae: AudioVAE,
    data: bytes,
    patch_size: int,
    padding: Padding = "right",
    max_seconds: float | None = None,
) -> torch.Tensor:
    """Audio file bytes (wav, mp3, flac, ogg, ...) -> latent patches [T, P, D]; raises AudioDecodeError."""
    return encode_wav(vae, decode_audio(data, vae.sample_rate, max_seconds), patch_size, padding)
