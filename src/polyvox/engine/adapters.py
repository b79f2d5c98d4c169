"""LoRA adapters in the engine: `AdapterOptions` (what every engine rank starts with, and restarts
with) and `EngineAdapters` (a rank's side: its model's `AdapterBank`, loaded and unloaded by control
calls). Control calls answer plain dicts, which cross from an engine process as they are; the back end
reads an adapter's files before any rank loads it (backends/adapter_files.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from polyvox.models.lora.files import AdapterError

if TYPE_CHECKING:
    from polyvox.models.interface import SpeechModel
    from polyvox.models.lora.bank import Adapter, AdapterBank
    from polyvox.models.lora.files import AdapterFiles

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


class EngineAdapters:
    """A rank's adapters, in its model's LM: the ones in `options.loaded` are registered when the rank
    starts (AdapterError stops it: a server must not come up without an adapter it was told to serve).
    Made before the engine core, so the slots' memory is taken before the KV cache is sized from what
    is left, and a model it compiles is compiled with the adapters' hooks (`compiled`). No bank when
    LoRA is off."""

    def __init__(self, model: SpeechModel, options: AdapterOptions, compiled: bool = False) -> None:
        self.bank: AdapterBank | None = None
        if not options.serving:
            return
        self.bank = model.lm.serve_adapters(options.max_loaded, options.max_rank, hook_all=compiled)
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
        """Register adapter `name`: its description (name, path, rank, layers adapted, hex digest), or
        `{"error": why}` when it does not fit."""
        if self.bank is None:
            return {"error": f"LoRA adapter {name!r}: this server serves no adapters (see enable_lora)"}
        try:
            adapter: Adapter = self.bank.register(name, path)
        except AdapterError as exc:
            return {"error": str(exc)}
        files = adapter.files
        return {
            "name": files.name,
            "path": str(files.path),
            "rank": files.config.r,
            "layers": len(adapter.sites),
            "digest": files.digest.hex(),
        }

    def unload(self, name: str) -> bool:
        return self.bank is not None and self.bank.unregister(name)
