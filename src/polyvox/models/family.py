"""`ModelFamily`: what polyvox knows of a family of models it serves, declared by the family itself in
its folder (`voxcpm2/family.py`, `voxcpm1/family.py`) and registered once in `architectures.py`: the
releases it has, the `architecture` its config.json names, its loaded-model class, its configs, and
what its prompts can do. Nothing here imports a family; the families import this.

A declaration imports its configs, not its model: the loaded-model class (and PyTorch with it) is named
by module and imported on first use (`model_class`), so the API side reads a family's configs, rates
and abilities in a process that never builds a model."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.speech_config import SpeechConfig

if TYPE_CHECKING:
    from polyvox.models.loaded_model import LoadedModel


@dataclass(frozen=True)
class ModelFamily:
    # the value of config.json's `architecture` that names this family (lower case)
    config_architecture: str
    # its releases, as `--arch` and `/v1/models` spell them
    archs: tuple[str, ...]
    # its config.json's class
    config_class: type[SpeechConfig]
    # its loaded model (its config, LM and AudioVAE classes, its prompts), as "module:Class"
    model: str
    # (arch, size) -> the release's tiny (CPU tests) or full (published size) config
    config_for: Callable[[str, str], SpeechConfig]
    # the release a config of this family describes
    arch_of: Callable[[SpeechConfig], str]
    # the AudioVAE a config describes: its input (reference) and output rates, its shape
    vae_config: Callable[[SpeechConfig], AudioVAEConfig]
    designs_voices: bool = False  # `instructions` can describe a voice
    clones_from_clip_alone: bool = False  # a reference clip clones a voice without its transcript

    @property
    def model_class(self) -> type[LoadedModel]:
        """The loaded-model class `model` names, imported now (with PyTorch)."""
        module, _, name = self.model.partition(":")
        model_class: type[LoadedModel] = getattr(importlib.import_module(module), name)
        return model_class
