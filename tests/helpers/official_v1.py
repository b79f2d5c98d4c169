"""The official `voxcpm` 2.0.3 VoxCPM 1.x implementation (`voxcpm.model.voxcpm.VoxCPMModel`, AudioVAE V1),
built from polyvox's tiny VoxCPM 1.x configs for parity tests."""

from __future__ import annotations

from pathlib import Path

import torch

from helpers.official import import_voxcpm, official_tokenizer
from polyvox.models.voxcpm1.config import VAE_V1_DEFAULTS, VoxCPM1Config


def official_vae_v1(config: VoxCPM1Config):
    """The official AudioVAE V1 of `config`, every weight-norm g/v perturbed so no weight is the default."""
    import_voxcpm()
    from voxcpm.modules.audiovae import AudioVAE, AudioVAEConfig

    vae = AudioVAE(AudioVAEConfig(**{**VAE_V1_DEFAULTS, **(config.audio_vae_config or {})}))
    with torch.no_grad():
        for p in vae.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return vae.float().eval()


def build_official_v1(config: VoxCPM1Config, tokenizer_dir: str | Path, seed: int = 0, std: float = 0.15):
    """`VoxCPMModel(config, tokenizer, vae)` on CPU in fp32, every matrix of the LM side ~ N(0, std)."""
    import_voxcpm()
    from voxcpm.model.voxcpm import VoxCPMConfig, VoxCPMModel

    torch.manual_seed(seed)
    cfg = VoxCPMConfig.model_validate({**config.model_dump(), "device": "cpu", "dtype": "float32"})
    model = VoxCPMModel(cfg, official_tokenizer(tokenizer_dir), official_vae_v1(config), device="cpu")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("audio_vae") and p.dim() >= 2:
                p.normal_(0.0, std)
    return model.float().eval()
