"""The VoxCPM 1.x family as polyvox registers it (models/architectures.py): VoxCPM-0.5B (`voxcpm1`) and
VoxCPM 1.5 (`voxcpm1.5`), which config.json names alike (`voxcpm`) and tells apart by its AudioVAE."""

from __future__ import annotations

from typing import cast

from polyvox.models.family import ModelFamily
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.voxcpm1.config import Variant, VoxCPM1Config, v1_config


def _config_for(arch: str, size: str) -> SpeechConfig:
    return v1_config(cast(Variant, arch), size)


def _arch_of(config: SpeechConfig) -> str:
    return cast(VoxCPM1Config, config).variant


def _vae_config(config: SpeechConfig) -> AudioVAEConfig:
    return cast(VoxCPM1Config, config).vae_config


FAMILY = ModelFamily(
    config_architecture="voxcpm",
    archs=("voxcpm1", "voxcpm1.5"),
    config_class=VoxCPM1Config,
    model="polyvox.models.voxcpm1.loaded_model:VoxCPM1",
    config_for=_config_for,
    arch_of=_arch_of,
    vae_config=_vae_config,
)
