"""The VoxCPM releases polyvox serves (`voxcpm1` = VoxCPM-0.5B, `voxcpm1.5`, `voxcpm2`): which one a
checkpoint's config.json describes, and the loaded-model class and configs of each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast, get_args

from polyvox.models.voxcpm1.config import VoxCPM1Config
from polyvox.models.voxcpm1.loaded_model import VoxCPM1, v1_config
from polyvox.models.voxcpm2.audio_vae import AudioVAEConfig
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.models.voxcpm2.random_checkpoint import config_for

Arch = Literal["voxcpm1", "voxcpm1.5", "voxcpm2"]
ARCHS: tuple[Arch, ...] = get_args(Arch)


def check_arch(arch: str) -> Arch:
    for known in ARCHS:
        if arch == known:
            return known
    raise ValueError(f"unknown architecture {arch!r} (one of {', '.join(ARCHS)})")


def model_class(arch: str) -> type[VoxCPM2]:
    return VoxCPM2 if check_arch(arch) == "voxcpm2" else VoxCPM1


def config_for_arch(arch: str, size: str) -> VoxCPM2Config:
    """The tiny (CPU tests) or full (published size) config of `arch`."""
    if check_arch(arch) == "voxcpm2":
        return config_for(size)
    return v1_config(cast("Literal['voxcpm1', 'voxcpm1.5']", arch), size)


def parse_config(data: Mapping[str, Any]) -> VoxCPM2Config:
    """A config.json's content as the config of the release it names in `architecture` ("voxcpm" for
    VoxCPM 1.x, "voxcpm2"; VoxCPM2 when absent). Raises ValidationError (a broken config) or ValueError
    (an architecture polyvox does not serve)."""
    name = str(data.get("architecture", "voxcpm2")).lower()
    if name == "voxcpm2":
        return VoxCPM2Config.model_validate(data)
    if name == "voxcpm":
        return VoxCPM1Config.model_validate(data)
    raise ValueError(f"architecture {name!r} is not one polyvox serves (voxcpm for VoxCPM 1.x, voxcpm2)")


def arch_of(config: VoxCPM2Config) -> Arch:
    return config.variant if isinstance(config, VoxCPM1Config) else "voxcpm2"


def vae_config(config: VoxCPM2Config) -> AudioVAEConfig:
    """The AudioVAE of `config`'s release: its input (reference) and output rates, its shape."""
    if isinstance(config, VoxCPM1Config):
        return config.vae_config
    return AudioVAEConfig.from_dict(config.audio_vae_config)


def designs_voices(arch: str) -> bool:
    """Whether `instructions` can describe the voice (voice design): VoxCPM2 only."""
    return check_arch(arch) == "voxcpm2"


def clones_from_clip_alone(arch: str) -> bool:
    """Whether a reference clip clones a voice without its transcript (VoxCPM2's reference prompt);
    VoxCPM 1.x clones only by continuing a transcribed clip."""
    return check_arch(arch) == "voxcpm2"
