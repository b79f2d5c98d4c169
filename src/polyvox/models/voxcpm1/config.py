"""VoxCPM 1.x configuration, read from a checkpoint's `config.json` with the official field names.

One config class serves both releases; which one a checkpoint is (`arch`) follows from its AudioVAE:
VoxCPM-0.5B ("voxcpm1") encodes 16 kHz audio with patches of 2, VoxCPM 1.5 ("voxcpm1.5") 44.1 kHz
with patches of 4.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.speech_config import LMConfig, RopeScalingConfig, SpeechConfig
from polyvox.models.voxcpm2.config import VoxCPM2Config

Variant = Literal["voxcpm1", "voxcpm1.5"]

# The official AudioVAE V1 defaults (a VoxCPM-0.5B config.json has no `audio_vae_config`): 16 kHz in and
# out, no output-rate conditioning.
VAE_V1_DEFAULTS: dict[str, Any] = {
    "encoder_dim": 128,
    "encoder_rates": [2, 5, 8, 8],
    "latent_dim": 64,
    "decoder_dim": 1536,
    "decoder_rates": [8, 8, 5, 2],
    "depthwise": True,
    "sample_rate": 16000,
    "use_noise_block": False,
}
# VoxCPM 1.5's AudioVAE: 44.1 kHz, 1,764 samples per latent frame (25 Hz).
VAE_V15: dict[str, Any] = {
    **VAE_V1_DEFAULTS,
    "encoder_dim": 64,
    "encoder_rates": [2, 3, 6, 7, 7],
    "decoder_dim": 2048,
    "decoder_rates": [7, 7, 6, 3, 2],
    "sample_rate": 44100,
}


class VoxCPM1Config(SpeechConfig):
    """The official `VoxCPMConfig`: the fields every family has (so the engine reads it as it reads
    VoxCPM2's) and `dit_mean_mode`, which sits at the top level here; a VoxCPM 1.x checkpoint has no
    ref-audio tokens, no `fusion_concat_proj` and a residual LM with RoPE. Its tiny and full sizes take
    VoxCPM2's LM config as their starting point."""

    architecture: str = "voxcpm"
    patch_size: int = 2
    residual_lm_num_layers: int = 6
    scalar_quantization_latent_dim: int = 256
    max_length: int = 4096
    dit_mean_mode: bool = False

    @field_validator("architecture")
    @classmethod
    def _is_voxcpm1(cls, value: str) -> str:
        if value.lower() != "voxcpm":
            raise ValueError(f"not a VoxCPM 1.x checkpoint (architecture={value!r})")
        return value

    @field_validator("dit_mean_mode")
    @classmethod
    def _no_mean_mode(cls, value: bool) -> bool:
        if value:
            raise ValueError("dit_mean_mode (mean-velocity LocDiT) is not supported")
        return value

    @property
    def vae_config(self) -> AudioVAEConfig:
        """The AudioVAE V1 as polyvox's AudioVAE builds it: output at the input rate, no rate condition."""
        data = {**VAE_V1_DEFAULTS, **(self.audio_vae_config or {})}
        return AudioVAEConfig.from_dict(
            {**data, "out_sample_rate": data["sample_rate"], "sr_bin_boundaries": None}
        )

    @property
    def variant(self) -> Variant:
        return "voxcpm1" if self.vae_config.sample_rate == 16000 else "voxcpm1.5"

    @classmethod
    def tiny(cls, variant: Variant = "voxcpm1.5") -> VoxCPM1Config:
        """The tiny CPU test config of `variant` (real VAE rates, few channels), fp32."""
        small = {"encoder_dim": 8, "latent_dim": 16, "decoder_dim": 64}
        vae = {**(VAE_V1_DEFAULTS if variant == "voxcpm1" else VAE_V15), **small}
        local = dict(hidden_dim=32, ffn_dim=64, num_heads=2, num_layers=1, kv_channels=16)
        return cls._build_v1(
            variant,
            lm=VoxCPM2Config.tiny().lm_config,
            encoder=local,
            dit={**local, "num_layers": 2},
            feat_dim=16,
            residual_layers=2,
            fsq_dim=32,
            audio_vae=vae,
            dtype="float32",
        )

    @classmethod
    def full(cls, variant: Variant = "voxcpm1.5") -> VoxCPM1Config:
        """The published sizes (VoxCPM-0.5B: 4-layer LocEnc/LocDiT; VoxCPM 1.5: 8-layer), bf16."""
        head_dim = 64
        factors = [1.0] * (head_dim // 2)
        lm = VoxCPM2Config.full().lm_config.model_copy(
            update={
                "hidden_size": 1024,
                "intermediate_size": 4096,
                "num_hidden_layers": 24,
                "num_attention_heads": 16,
                "num_key_value_heads": 2,
                "kv_channels": head_dim,
                "rope_scaling": RopeScalingConfig(
                    long_factor=factors, short_factor=factors, original_max_position_embeddings=32768
                ),
            }
        )
        layers = 4 if variant == "voxcpm1" else 8
        local = dict(hidden_dim=1024, ffn_dim=4096, num_heads=16, num_layers=layers, kv_channels=None)
        return cls._build_v1(
            variant,
            lm=lm,
            encoder=local,
            dit=local,
            feat_dim=64,
            residual_layers=6,
            fsq_dim=256,
            audio_vae=dict(VAE_V1_DEFAULTS if variant == "voxcpm1" else VAE_V15),
            dtype="bfloat16",
        )

    @classmethod
    def _build_v1(
        cls,
        variant: Variant,
        *,
        lm: LMConfig,
        encoder,
        dit,
        feat_dim,
        residual_layers,
        fsq_dim,
        audio_vae,
        dtype,
    ) -> VoxCPM1Config:
        cfm = {"sigma_min": 1e-6, "solver": "euler", "t_scheduler": "log-norm", "inference_cfg_rate": 2.0}
        return cls.model_validate(
            {
                "architecture": "voxcpm",
                "lm_config": lm.model_dump(),
                "patch_size": 2 if variant == "voxcpm1" else 4,
                "feat_dim": feat_dim,
                "residual_lm_num_layers": residual_layers,
                "scalar_quantization_latent_dim": fsq_dim,
                "scalar_quantization_scale": 9,
                "encoder_config": encoder,
                "dit_config": {**dit, "cfm_config": cfm},
                "audio_vae_config": audio_vae,
                "max_length": 4096,
                "dtype": dtype,
            }
        )


def v1_config(variant: Variant, size: str) -> VoxCPM1Config:
    if size not in ("tiny", "full"):
        raise ValueError(f"unknown checkpoint size {size!r} (tiny or full)")
    return VoxCPM1Config.tiny(variant) if size == "tiny" else VoxCPM1Config.full(variant)
