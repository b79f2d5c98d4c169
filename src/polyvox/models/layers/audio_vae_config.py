"""`AudioVAEConfig`: the AudioVAE's shape and rates (the official `AudioVAEConfigV2` fields), apart from the
module that builds it (`audio_vae.py`), so that what a model's output and reference rates are is known
without PyTorch: the API side of a server reads them from a config before any engine loads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AudioVAEConfig:
    """Official `AudioVAEConfigV2` fields and defaults."""

    encoder_dim: int = 128
    encoder_rates: list[int] = field(default_factory=lambda: [2, 5, 8, 8])
    latent_dim: int | None = 64
    decoder_dim: int = 2048
    decoder_rates: list[int] = field(default_factory=lambda: [8, 6, 5, 2, 2, 2])
    depthwise: bool = True
    sample_rate: int = 16000
    out_sample_rate: int = 48000
    use_noise_block: bool = False
    sr_bin_boundaries: list[int] | None = field(default_factory=lambda: [20000, 30000, 40000])
    cond_type: str = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False

    def __post_init__(self) -> None:
        if self.latent_dim is None:
            self.latent_dim = self.encoder_dim * 2 ** len(self.encoder_rates)
        if self.cond_type not in ("scale_bias", "scale_bias_init", "add", "concat"):
            raise ValueError(f"unknown AudioVAE cond_type {self.cond_type!r}")
        if self.cond_type == "concat" and not self.cond_out_layer:
            raise ValueError("AudioVAE cond_type 'concat' needs cond_out_layer")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> AudioVAEConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def tiny(cls) -> AudioVAEConfig:
        """Real rates (16 kHz in, 48 kHz out, 25 Hz latents), few channels: for tests on a CPU."""
        return cls(encoder_dim=8, latent_dim=16, decoder_dim=64)
