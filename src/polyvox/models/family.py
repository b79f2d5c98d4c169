"""`ModelFamily`: what polyvox knows of a family of models it serves, declared by the family itself in
its folder (`voxcpm2/family.py`, `voxcpm1/family.py`) and registered once in `architectures.py`: the
releases it has, the `architecture` its config.json names, its loaded-model class, its configs, and
what its prompts can do. Nothing here imports a family; the families import this."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from polyvox.models.layers.audio_vae import AudioVAEConfig
from polyvox.models.loaded_model import LoadedModel
from polyvox.models.speech_config import SpeechConfig


@dataclass(frozen=True)
class ModelFamily:
    # the value of config.json's `architecture` that names this family (lower case)
    config_architecture: str
    # its releases, as `--arch` and `/v1/models` spell them
    archs: tuple[str, ...]
    # its loaded model (its config, LM and AudioVAE classes, its prompts)
    model_class: type[LoadedModel]
    # (arch, size) -> the release's tiny (CPU tests) or full (published size) config
    config_for: Callable[[str, str], SpeechConfig]
    # the release a config of this family describes
    arch_of: Callable[[SpeechConfig], str]
    # the AudioVAE a config describes: its input (reference) and output rates, its shape
    vae_config: Callable[[SpeechConfig], AudioVAEConfig]
    designs_voices: bool = False  # `instructions` can describe a voice
    clones_from_clip_alone: bool = False  # a reference clip clones a voice without its transcript
