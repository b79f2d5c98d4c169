"""The model families polyvox serves, registered here (`FAMILIES`: one line per family, naming the module
that declares it, imported on first use as vLLM's `ModelRegistry` imports a model's module), and the
lookups the rest of polyvox makes through them: which release a name or a checkpoint's config.json
means, its loaded-model class and configs, what it can do. Importing this module imports no family, so
the engine can look families up without loading one; a family never imports this module."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from polyvox.models.family import ModelFamily
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.speech_config import SpeechConfig

if TYPE_CHECKING:
    from polyvox.models.loaded_model import LoadedModel


@dataclass(frozen=True)
class RegisteredFamily:
    """A family as the registry knows it before importing it: the names its `FAMILY` declares (config.json's
    `architecture`, its releases) and the module that declares it."""

    config_architecture: str
    archs: tuple[str, ...]
    module: str


FAMILIES: tuple[RegisteredFamily, ...] = (
    RegisteredFamily("voxcpm", ("voxcpm1", "voxcpm1.5"), "polyvox.models.voxcpm1.family"),
    RegisteredFamily("voxcpm2", ("voxcpm2",), "polyvox.models.voxcpm2.family"),
)
ARCHS: tuple[str, ...] = tuple(arch for family in FAMILIES for arch in family.archs)


@cache
def load_family(registered: RegisteredFamily) -> ModelFamily:
    """The family's declaration (`FAMILY` of its module), imported on first use."""
    family: ModelFamily = importlib.import_module(registered.module).FAMILY
    return family


def family_of(arch: str) -> ModelFamily:
    """The family of release `arch`; ValueError for one polyvox does not serve."""
    for registered in FAMILIES:
        if arch in registered.archs:
            return load_family(registered)
    raise ValueError(f"unknown architecture {arch!r} (one of {', '.join(ARCHS)})")


def model_class(arch: str) -> type[LoadedModel]:
    """The loaded-model class of release `arch`, imported now (with PyTorch)."""
    return family_of(arch).model_class


def config_for_arch(arch: str, size: str) -> SpeechConfig:
    """The tiny (CPU tests) or full (published size) config of `arch`."""
    return family_of(arch).config_for(arch, size)


def parse_config(data: Mapping[str, Any]) -> SpeechConfig:
    """A config.json's content as the config of the family it names in `architecture` ("voxcpm" for
    VoxCPM 1.x, "voxcpm2"; VoxCPM2 when absent). Raises ValidationError (a broken config) or ValueError
    (an architecture polyvox does not serve)."""
    name = str(data.get("architecture", "voxcpm2")).lower()
    for registered in FAMILIES:
        if registered.config_architecture == name:
            return load_family(registered).config_class.model_validate(data)
    served = ", ".join(registered.config_architecture for registered in FAMILIES)
    raise ValueError(f"architecture {name!r} is not one polyvox serves ({served})")


def _family_of_config(config: SpeechConfig) -> ModelFamily:
    for registered in FAMILIES:
        if registered.config_architecture == config.architecture.lower():
            family = load_family(registered)
            if type(config) is family.config_class:
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
