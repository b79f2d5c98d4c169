"""LoRA adapters across the engine boundary: `AdapterOptions` (what every engine rank starts with, and
restarts with), `EngineAdapters` (a rank's side: its model's `AdapterBank`, loaded and unloaded by
control calls) and `read_adapter_files` (the API side's read of an adapter's files, before any rank
loads it). Control calls answer plain dicts, which cross to an engine process as they are."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyvox.backends.base import OPENAI_VOICES, AdapterInfo
from polyvox.models.lora.bank import Adapter, AdapterBank
from polyvox.models.lora.files import AdapterError, AdapterFiles, read_adapter
from polyvox.models.voxcpm2.model import VoxCPM2LM
from polyvox.voices.store import NAME_PATTERN

log = logging.getLogger(__name__)


@dataclass
class AdapterOptions:
    """`loaded`: the adapters loaded now, as the API side read them when they were loaded. A rank
    (re)starting registers these tensors, not the directories again: a rank restarted after an adapter's
    directory was deleted or rewritten still serves what the others serve (an adapter is a few MB)."""

    max_loaded: int = 4
    max_rank: int = 32
    loaded: dict[str, AdapterFiles] = field(default_factory=dict)
    enabled: bool = False  # adapters served at all (their slots reserved); on when any is loaded at start

    @property
    def serving(self) -> bool:
        return self.enabled or bool(self.loaded)


def info_of(files: AdapterFiles, layers: int) -> AdapterInfo:
    return AdapterInfo(files.name, str(files.path), files.config.r, layers, files.digest.hex())


def read_adapter_files(name: str, path: str | Path) -> AdapterFiles:
    """An adapter's files (AdapterError if they cannot be read, or `name` cannot be a voice's); whether
    it fits the model is for the engine to say."""
    if not NAME_PATTERN.fullmatch(name):
        raise AdapterError(name, "an adapter is also a voice: its name takes 1-64 letters, digits, _ . -")
    if name.lower() in OPENAI_VOICES:
        raise AdapterError(name, "that is a builtin voice's name")
    return read_adapter(name, path)


def files_info(files: AdapterFiles) -> AdapterInfo:
    """An adapter's description from its files alone."""
    return info_of(files, len({key.rpartition(".")[0] for key in files.tensors}))


class EngineAdapters:
    """A rank's adapters: the ones in `options.loaded` are registered when the rank starts (AdapterError
    stops it: a server must not come up without an adapter it was told to serve). Made before the
    batching core, so the slots' memory is taken before the KV cache is sized from what is left, and a
    model it compiles is compiled with the adapters' hooks (`compiled`). No bank when LoRA is off."""

    def __init__(self, lm: VoxCPM2LM, options: AdapterOptions, compiled: bool = False) -> None:
        self.bank: AdapterBank | None = None
        if not options.serving:
            return
        self.bank = lm.serve_adapters(options.max_loaded, options.max_rank, hook_all=compiled)
        log.info(
            "LoRA: %.1f MiB reserved for %d adapter slots of rank %d",
            self.bank.nbytes / 2**20,
            options.max_loaded,
            options.max_rank,
        )
        for files in options.loaded.values():
            self.bank.add(files)
        # into device slots now, so no first request waits for the copy
        for name in list(options.loaded)[: options.max_loaded]:
            self.bank.release(self.bank.acquire(name))

    def load(self, name: str, path: str) -> dict[str, Any]:
        """Register adapter `name`: its description, or `{"error": why}` when it does not fit."""
        if self.bank is None:
            return {"error": f"LoRA adapter {name!r}: this server serves no adapters (see enable_lora)"}
        try:
            adapter: Adapter = self.bank.register(name, path)
        except AdapterError as exc:
            return {"error": str(exc)}
        info = info_of(adapter.files, len(adapter.sites))
        return {
            "name": info.name,
            "path": info.path,
            "rank": info.rank,
            "layers": info.layers,
            "digest": info.digest,
        }

    def unload(self, name: str) -> bool:
        return self.bank is not None and self.bank.unregister(name)
