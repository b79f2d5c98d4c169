"""VoxCPM2 model configuration, read from a checkpoint's `config.json` with the official field names (the
fields every family shares are `models/speech_config.py`'s)."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from polyvox.models.speech_config import (
    CfmConfig,
    DitConfig,
    EncoderConfig,
    LMConfig,
    RopeScalingConfig,
    SpeechConfig,
)

__all__ = ["CfmConfig", "DitConfig", "EncoderConfig", "LMConfig", "RopeScalingConfig", "VoxCPM2Config"]

# AudioVAE V2 defaults, written into generated config.json files (the VAE module owns their meaning).
_VAE_DEFAULTS: dict[str, Any] = {
    "encoder_dim": 128,
    "encoder_rates": [2, 5, 8, 8],
    "latent_dim": 64,
    "decoder_dim": 2048,
    "decoder_rates": [8, 6, 5, 2, 2, 2],
    "depthwise": True,
    "sample_rate": 16000,
    "out_sample_rate": 48000,
    "use_noise_block": False,
    "sr_bin_boundaries": [20000, 30000, 40000],
    "cond_type": "scale_bias",
    "cond_dim": 128,
    "cond_out_layer": False,
}


class VoxCPM2Config(SpeechConfig):
    architecture: str = "voxcpm2"

    @field_validator("architecture")
    @classmethod
    def _is_voxcpm2(cls, value: str) -> str:
        if value.lower() != "voxcpm2":
            raise ValueError(f"not a VoxCPM2 checkpoint (architecture={value!r})")
        return value

    @classmethod
    def tiny(cls) -> VoxCPM2Config:
        """The tiny CPU test config (the anchor script's SIZE=tiny numbers), fp32."""
        return cls._build(
            lm=_lm(64, 128, 2, 4, 2, 16, 300, 512),
            encoder=dict(hidden_dim=32, ffn_dim=64, num_heads=2, num_layers=1, kv_channels=16),
            dit=dict(hidden_dim=32, ffn_dim=64, num_heads=2, num_layers=2, kv_channels=16),
            feat_dim=16,
            residual_layers=2,
            fsq_dim=32,
            audio_vae={**_VAE_DEFAULTS, "encoder_dim": 8, "latent_dim": 16, "decoder_dim": 64},
            dtype="float32",
        )

    @classmethod
    def full(cls) -> VoxCPM2Config:
        """The published VoxCPM2 size (2.3 B parameters with the VAE), bf16."""
        return cls._build(
            lm=_lm(2048, 6144, 28, 16, 2, 128, 73448, 32768),
            encoder=dict(hidden_dim=1024, ffn_dim=4096, num_heads=16, num_layers=12, kv_channels=128),
            dit=dict(hidden_dim=1024, ffn_dim=4096, num_heads=16, num_layers=12, kv_channels=128),
            feat_dim=64,
            residual_layers=8,
            fsq_dim=512,
            audio_vae=dict(_VAE_DEFAULTS),
            dtype="bfloat16",
        )

    @classmethod
    def _build(
        cls, *, lm, encoder, dit, feat_dim, residual_layers, fsq_dim, audio_vae, dtype
    ) -> VoxCPM2Config:
        cfm = {"sigma_min": 1e-6, "solver": "euler", "t_scheduler": "log-norm", "inference_cfg_rate": 2.0}
        return cls.model_validate(
            {
                "architecture": "voxcpm2",
                "lm_config": lm,
                "patch_size": 4,
                "feat_dim": feat_dim,
                "residual_lm_num_layers": residual_layers,
                "residual_lm_no_rope": True,
                "scalar_quantization_latent_dim": fsq_dim,
                "scalar_quantization_scale": 9,
                "encoder_config": encoder,
                "dit_config": {**dit, "cfm_config": cfm},
                "audio_vae_config": audio_vae,
                "max_length": 1024,
                "dtype": dtype,
            }
        )


def _lm(hidden, inter, layers, heads, kv_heads, head_dim, vocab, max_pos) -> dict[str, Any]:
    return {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "max_position_embeddings": max_pos,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000,
        "kv_channels": head_dim,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [1.0] * (head_dim // 2),
            "short_factor": [1.0] * (head_dim // 2),
            "original_max_position_embeddings": max_pos,
        },
        "vocab_size": vocab,
        "use_mup": False,
        "scale_emb": 12,
        "dim_model_base": 256,
        "scale_depth": 1.4,
    }


def config_for(size: str) -> VoxCPM2Config:
    """VoxCPM2's tiny (CPU tests) or full (published size) config."""
    if size not in ("tiny", "full"):
        raise ValueError(f"unknown checkpoint size {size!r} (tiny or full)")
    return VoxCPM2Config.tiny() if size == "tiny" else VoxCPM2Config.full()
