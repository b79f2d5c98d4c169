"""VoxCPM2 model configuration, read from a checkpoint's `config.json` with the official field names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, field_validator

_DTYPES = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "float32": torch.float32,
    "fp32": torch.float32,
}

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


class _Config(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RopeScalingConfig(_Config):
    type: str = "longrope"
    long_factor: list[float]
    short_factor: list[float]
    original_max_position_embeddings: int


class LMConfig(_Config):
    """A MiniCPM4 stack; the LocEnc/LocDiT/residual stacks are copies with a few fields changed."""

    bos_token_id: int = 1
    eos_token_id: int = 2
    hidden_size: int
    intermediate_size: int
    max_position_embeddings: int
    num_attention_heads: int
    num_hidden_layers: int
    num_key_value_heads: int
    rms_norm_eps: float = 1e-5
    rope_scaling: RopeScalingConfig
    vocab_size: int
    use_mup: bool = True
    scale_emb: float = 1.0
    dim_model_base: int = 256
    scale_depth: float = 1.0
    rope_theta: float = 10000.0
    kv_channels: int | None = None
    no_rope: bool = False

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads


class EncoderConfig(_Config):
    hidden_dim: int = 1024
    ffn_dim: int = 4096
    num_heads: int = 16
    num_layers: int = 4
    kv_channels: int | None = None


class CfmConfig(_Config):
    sigma_min: float = 1e-6
    solver: str = "euler"
    t_scheduler: str = "log-norm"
    inference_cfg_rate: float = 1.0


class DitConfig(EncoderConfig):
    dit_mean_mode: bool = False
    cfm_config: CfmConfig = CfmConfig()


class VoxCPM2Config(_Config):
    architecture: str = "voxcpm2"
    lm_config: LMConfig
    patch_size: int = 4
    feat_dim: int = 64
    residual_lm_num_layers: int = 8
    residual_lm_no_rope: bool = False
    scalar_quantization_latent_dim: int = 512
    scalar_quantization_scale: int = 9
    encoder_config: EncoderConfig
    dit_config: DitConfig
    audio_vae_config: dict[str, Any] | None = None
    max_length: int = 8192
    device: str = "cuda"
    dtype: str = "bfloat16"

    @field_validator("architecture")
    @classmethod
    def _is_voxcpm2(cls, value: str) -> str:
        if value.lower() != "voxcpm2":
            raise ValueError(f"not a VoxCPM2 checkpoint (architecture={value!r})")
        return value

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in _DTYPES:
            raise ValueError(f"unsupported dtype {value!r}")
        return value

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    @property
    def residual_lm_config(self) -> LMConfig:
        return self.lm_config.model_copy(
            update={
                "num_hidden_layers": self.residual_lm_num_layers,
                "vocab_size": 0,
                "no_rope": self.residual_lm_no_rope,
            }
        )

    def local_config(self, local: EncoderConfig) -> LMConfig:
        """The MiniCPM4 config of a LocEnc/LocDiT stack: the LM config with the local sizes."""
        return self.lm_config.model_copy(
            update={
                "hidden_size": local.hidden_dim,
                "intermediate_size": local.ffn_dim,
                "num_attention_heads": local.num_heads,
                "num_hidden_layers": local.num_layers,
                "kv_channels": local.kv_channels,
                "vocab_size": 0,
            }
        )

    @classmethod
    def from_json(cls, path: str | Path) -> VoxCPM2Config:
        """Read `config.json` (or the `config.json` inside a checkpoint directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.model_dump(), indent=2), encoding="utf-8")

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
