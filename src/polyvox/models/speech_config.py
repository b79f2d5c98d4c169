"""What every VoxCPM release's configuration holds, with the official field names: the MiniCPM4 stacks'
configs and `SpeechConfig`, the fields the engine reads of any family (a family's config, VoxCPM2's or
VoxCPM 1.x's, is a `SpeechConfig` with its own defaults, checks and sizes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, field_validator

from polyvox.models.dtypes import CONFIG_DTYPES, torch_dtype

if TYPE_CHECKING:
    import torch


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


class SpeechConfig(_Config):
    """A checkpoint's `config.json`: its LM, residual LM, LocEnc and LocDiT stacks, patches and AudioVAE
    (`audio_vae_config`, read by the family's AudioVAE). The defaults are VoxCPM2's."""

    architecture: str
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

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in CONFIG_DTYPES:
            raise ValueError(f"unsupported dtype {value!r}")
        return value

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch_dtype(self.dtype)

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
    def from_json(cls, path: str | Path) -> Self:
        """Read `config.json` (or the `config.json` inside a checkpoint directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.model_dump(), indent=2), encoding="utf-8")
