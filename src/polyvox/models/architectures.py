"""The model families polyvox serves, registered here (`FAMILIES`: one line per family), and the lookups
the rest of polyvox makes through them: which release a name or a checkpoint's config.json means, its
loaded-model class and configs, what it can do. A family never imports this module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polyvox.models.family import ModelFamily
from polyvox.models.layers.audio_vae import AudioVAEConfig
from polyvox.models.loaded_model import LoadedModel
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.voxcpm1.family import FAMILY as VOXCPM1
from polyvox.models.voxcpm2.family import FAMILY as VOXCPM2

FAMILIES: tuple[ModelFamily, ...] = (VOXCPM1, VOXCPM2)
ARCHS: tuple[str, ...] = tuple(arch for family in FAMILIES for arch in family.archs)


def family_of(arch: str) -> ModelFamily:
    """The family of release `arch`; ValueError for one polyvox does not serve."""
    for family in FAMILIES:
        if arch in family.archs:
            return family
    raise ValueError(f"unknown architecture {arch!r} (one of {', '.join(ARCHS)})")


def model_class(arch: str) -> type[LoadedModel]:
    return family_of(arch).model_class


def config_for_arch(arch: str, size: str) -> SpeechConfig:
    """The tiny (CPU tests) or full (published size) config of `arch`."""
    return family_of(arch).config_for(arch, size)


def parse_config(data: Mapping[str, Any]) -> SpeechConfig:
    """A config.json's content as the config of the family it names in `architecture` ("voxcpm" for
    VoxCPM 1.x, "voxcpm2"; VoxCPM2 when absent). Raises ValidationError (a broken config) or ValueError
    (an architecture polyvox does not serve)."""
    name = str(data.get("architecture", "voxcpm2")).lower()
    for family in FAMILIES:
        if family.config_architecture == name:
            return family.model_class.config_class.model_validate(data)
    served = ", ".join(family.config_architecture for family in FAMILIES)
    raise ValueError(f"architecture {name!r} is not one polyvox serves ({served})")


def _family_of_config(config: SpeechConfig) -> ModelFamily:
    for family in FAMILIES:
        if type(config) is family.model_class.config_class:
            return family
    raise ValueError(f"{type(config).__name__} is no registered family's config")


def arch_of(config: SpeechConfig) -> str:
    return _family_of_config(config).arch_of(config)


def vae_config(config: SpeechConfig) -> AudioVAEConfig:
    """The AudioVAE of `config`'s release: its input (reference) and output rates, its shape."""
    return _family_of_config(config).vae_config(config)


def designs_voices(arch: str) -> bool:
    """Whether `instructions` can describe the voice (voice design): VoxCPM2 only."""
    return family_of(arch).designs_voices


def clones_from_clip_alone(arch: str) -> bool:
    """Whether a reference clip clones a voice without its transcript (VoxCPM2's reference prompt);
    VoxCPM 1.x clones only by continuing a transcribed clip."""
    return family_of(arch).clones_from_clip_alone
