"""The VoxCPM2 family as polyvox registers it (models/architectures.py): one release, `voxcpm2`."""

from __future__ import annotations

from polyvox.models.family import ModelFamily
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.voxcpm2.config import VoxCPM2Config, config_for


def _config_for(arch: str, size: str) -> SpeechConfig:
    return config_for(size)


def _vae_config(config: SpeechConfig) -> AudioVAEConfig:
    return AudioVAEConfig.from_dict(config.audio_vae_config)


FAMILY = ModelFamily(
    config_architecture="voxcpm2",
    archs=("voxcpm2",),
    config_class=VoxCPM2Config,
    model="polyvox.models.voxcpm2.loaded_model:VoxCPM2",
    config_for=_config_for,
    arch_of=lambda config: "voxcpm2",
    vae_config=_vae_config,
    designs_voices=True,
    clones_from_clip_alone=True,
)
