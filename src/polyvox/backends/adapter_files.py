"""A LoRA adapter as the API side reads it, before any engine rank loads it: its name checked (a loaded
adapter is also a voice of that name), its files read (`read_adapter_files`), and what `/admin/lora`
shows of it (`files_info`). Whether it fits the model is for the engine to say."""

from __future__ import annotations

from pathlib import Path

from polyvox.backends.base import OPENAI_VOICES, VOICE_NAME, AdapterInfo
from polyvox.models.lora.files import AdapterError, AdapterFiles, read_adapter


def read_adapter_files(name: str, path: str | Path) -> AdapterFiles:
    """An adapter's files; AdapterError if they cannot be read, or `name` cannot be a voice's."""
    if not VOICE_NAME.fullmatch(name):
        raise AdapterError(name, "an adapter is also a voice: its name takes 1-64 letters, digits, _ . -")
    if name.lower() in OPENAI_VOICES:
        raise AdapterError(name, "that is a builtin voice's name")
    return read_adapter(name, path)


def files_info(files: AdapterFiles) -> AdapterInfo:
    """An adapter's description from its files alone (the linear layers its tensors adapt)."""
    layers = len({key.rpartition(".")[0] for key in files.tensors})
    return AdapterInfo(files.name, str(files.path), files.config.r, layers, files.digest.hex())
