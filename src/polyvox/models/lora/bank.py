"""`AdapterBank`: the adapters a model serves. Registered adapters (checked against the model, weights
kept on the host) are made resident on demand in one of `max_loaded` device slots, least recently used
first out; a running request pins its adapter's slot until it finishes. Each forward of the model names
every batch row's slot (`rows`), and the hooks on the adapted linears add that slot's update. The device
memory of every slot of every layer an adapter could adapt is reserved when the bank is made, so loading
adapters later never allocates."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .files import AdapterError, AdapterFiles, read_adapter
from .sites import DIT_SCOPE, LM_SCOPES, Site, linear_sites, selected_sites
from .stacked import StackedLoRA


@dataclass(frozen=True)
class Adapter:
    """A registered adapter: its files and the official names of the layers it adapts."""

    files: AdapterFiles
    sites: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.files.name


@dataclass(frozen=True)
class AdapterUse:
    """A request's hold on a resident adapter: its slot, and its content digest (which salts the prompt's
    prefix-cache hashes: the same tokens give other K/V under another adapter)."""

    name: str
    slot: int
    digest: bytes


class SlotsBusy(AdapterError):
    """Every slot holds an adapter a running request uses; the request can be retried later."""


class AdapterBank:
    def __init__(
        self,
        model: nn.Module,
        *,
        max_loaded: int,
        max_rank: int,
        default_proj: list[str],
        shared_rows: tuple[str, ...] = (),
        hook_all: bool = False,
    ) -> None:
        """`default_proj`: the architecture's official default projection targets; `shared_rows`: name
        prefixes of layers computed once for a whole batch (no per-row update is possible there).

        A layer's hook is added when an adapter first adapts it; `hook_all` adds every layer's at once,
        for a model about to be compiled: compiled code runs the hooks it was traced with, and would
        never see one added later. The slots' memory is reserved here, for every adaptable layer."""
        if max_loaded < 1 or max_rank < 1:
            raise ValueError("max_loaded and max_rank must be at least 1")
        self.model = model
        self.max_loaded, self.max_rank = max_loaded, max_rank
        self.default_proj = default_proj
        self.shared_rows = shared_rows
        self.sites = linear_sites(model)
        self._modules = dict(model.named_modules())
        self._stacks: dict[str, StackedLoRA] = {}
        self._hooked: set[str] = set()
        self._registered: dict[str, Adapter] = {}
        self._resident: OrderedDict[bytes, int] = OrderedDict()  # digest -> slot, least recent first
        self._pins: dict[int, int] = {}
        self._lock = threading.Lock()
        self._mask: torch.Tensor | None = None
        weight = next(model.parameters())
        slots = max_loaded + 1  # slot 0: no adapter, all zeros
        self._column_slot = torch.arange(slots, device=weight.device).repeat_interleave(max_rank)
        self._dtype = weight.dtype
        adaptable = sorted(
            {
                site.module
                for site_name, site in self.sites.items()
                if (site_name.startswith((*LM_SCOPES, DIT_SCOPE)) or "." not in site_name)
                and not site_name.startswith(shared_rows)
            }
        )
        # one block for all of them: the memory a full bank takes is gone before the KV cache is sized
        self._storage: dict[str, torch.Tensor] = {}
        sizes = {name: self._numel(name) for name in adaptable}
        reserved = torch.empty(sum(sizes.values()), dtype=weight.dtype, device=weight.device)
        for name, piece in zip(sizes, reserved.split(list(sizes.values())), strict=True):
            self._storage[name] = piece
        self._reserved = reserved
        if hook_all:
            for name in adaptable:
                self._hook_module(name)

    # ------------------------------------------------------------------ registry

    def register(self, name: str, directory: str | Path) -> Adapter:
        """Read and check adapter `name` (replacing one of that name); AdapterError if it does not fit."""
        return self.add(read_adapter(name, directory))

    def add(self, files: AdapterFiles) -> Adapter:
        """Check an adapter already read (replacing one of its name); AdapterError if it does not fit."""
        adapter = self._check(files)
        with self._lock:
            self._forget(self._registered.pop(files.name, None))
            self._registered[files.name] = adapter
        return adapter

    def unregister(self, name: str) -> bool:
        with self._lock:
            adapter = self._registered.pop(name, None)
            self._forget(adapter)
        return adapter is not None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._registered)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._registered

    def _forget(self, adapter: Adapter | None) -> None:
        """Free the slot of an adapter no name refers to any more, unless a running request holds it."""
        if adapter is None or any(a.files.digest == adapter.files.digest for a in self._registered.values()):
            return
        slot = self._resident.get(adapter.files.digest)
        if slot is not None and not self._pins.get(slot):
            del self._resident[adapter.files.digest]

    def _check(self, files: AdapterFiles) -> Adapter:
        name, config, tensors = files.name, files.config, files.tensors
        if config.r > self.max_rank:
            raise AdapterError(name, f"rank {config.r} is above this server's lora_max_rank {self.max_rank}")
        chosen = selected_sites(self.sites, config, self.default_proj)
        if not chosen:
            raise AdapterError(name, "its lora_config adapts no layer of this model")
        for key in tensors:
            base, _, kind = key.rpartition(".")
            if kind not in ("lora_A", "lora_B"):
                raise AdapterError(name, f"tensor {key} is not a lora_A/lora_B weight")
            if base not in self.sites:
                raise AdapterError(name, f"tensor {key} names no layer of this model (another base model?)")
            if base not in chosen:
                raise AdapterError(name, f"tensor {key} adapts a layer its lora_config does not select")
        for site_name in chosen:
            if site_name.startswith(self.shared_rows):
                raise AdapterError(name, f"it adapts {site_name}, which one batch shares: not supported")
            self._check_pair(files, site_name, self.sites[site_name])
        return Adapter(files, tuple(chosen))

    def _check_pair(self, files: AdapterFiles, site_name: str, site: Site) -> None:
        name, r = files.name, files.config.r
        pair = []
        for kind in ("lora_A", "lora_B"):
            tensor = files.tensors.get(f"{site_name}.{kind}")
            if tensor is None:
                raise AdapterError(name, f"missing tensor {site_name}.{kind}")
            pair.append(tensor)
        a, b = pair
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != r or b.shape[1] != r:
            raise AdapterError(
                name,
                f"wrong rank: {site_name}.lora_A is {list(a.shape)} and .lora_B {list(b.shape)}, "
                f"its lora_config says r={r}",
            )
        if a.shape[1] != site.in_features or b.shape[0] != site.out_features:
            raise AdapterError(
                name,
                f"{site_name} is {site.in_features}->{site.out_features} in this model, the adapter's "
                f"{a.shape[1]}->{b.shape[0]} (made for another base model?)",
            )
        if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise AdapterError(name, f"{site_name} holds non-finite values")

    # ------------------------------------------------------------------ residency (the engine's thread)

    def acquire(self, name: str) -> AdapterUse:
        """Make `name` resident (evicting the least recently used idle adapter if every slot is taken) and
        pin it; release the use when the request ends. KeyError for a name not registered."""
        with self._lock:
            adapter = self._registered[name]
            digest = adapter.files.digest
            slot = self._resident.get(digest)
            if slot is None:
                slot = self._free_slot(name)
                self._write(adapter, slot)
                self._resident[digest] = slot
            self._resident.move_to_end(digest)
            self._pins[slot] = self._pins.get(slot, 0) + 1
            return AdapterUse(name, slot, digest)

    def release(self, use: AdapterUse) -> None:
        with self._lock:
            self._pins[use.slot] -= 1

    def _free_slot(self, name: str) -> int:
        taken = set(self._resident.values())
        for slot in range(1, self.max_loaded + 1):
            if slot not in taken:
                return slot
        for digest, slot in self._resident.items():  # least recently used first
            if not self._pins.get(slot):
                del self._resident[digest]
                return slot
        raise SlotsBusy(name, f"all {self.max_loaded} adapter slots are held by running requests")

    def _write(self, adapter: Adapter, slot: int) -> None:
        for stack in self._stacks.values():
            stack.clear(slot)
        scaling = adapter.files.config.scaling
        for site_name in adapter.sites:
            site = self.sites[site_name]
            tensors = adapter.files.tensors
            self._stack(site.module).write(
                slot, site.part, tensors[f"{site_name}.lora_A"], tensors[f"{site_name}.lora_B"], scaling
            )

    def _parts(self, module_name: str) -> list[tuple[int, int]]:
        parts = sorted(
            (s.part, s.out_start, s.out_features) for s in self.sites.values() if s.module == module_name
        )
        return [(start, width) for _, start, width in parts]

    def _numel(self, module_name: str) -> int:
        module = self._modules[module_name]
        assert isinstance(module, nn.Linear)
        return StackedLoRA.numel(module, len(self._parts(module_name)), self.max_loaded + 1, self.max_rank)

    def _stack(self, module_name: str) -> StackedLoRA:
        stack = self._stacks.get(module_name)
        if stack is None:
            module = self._modules[module_name]
            assert isinstance(module, nn.Linear)
            stack = StackedLoRA(
                module,
                self._parts(module_name),
                self.max_loaded + 1,
                self.max_rank,
                storage=self._storage[module_name],
            )
            self._stacks[module_name] = stack
            self._hook_module(module_name)
        return stack

    def _hook_module(self, module_name: str) -> None:
        if module_name not in self._hooked:
            self._modules[module_name].register_forward_hook(self._hook(module_name))
            self._hooked.add(module_name)

    def resident(self) -> list[str]:
        """Names of the adapters in device slots, least recently used first."""
        with self._lock:
            by_digest = {a.files.digest: name for name, a in self._registered.items()}
            return [by_digest[d] for d in self._resident if d in by_digest]

    def pinned(self) -> int:
        """Uses held by running requests."""
        with self._lock:
            return sum(self._pins.values())

    @property
    def nbytes(self) -> int:
        """Device memory the adapter slots hold: reserved for all of them when the bank was made."""
        return self._reserved.nbytes

    # ------------------------------------------------------------------ forward

    @contextmanager
    def rows(self, slots: torch.Tensor | None) -> Iterator[None]:
        """Within, every adapted linear adds to row `i` of its input the update of adapter slot `slots[i]`
        (`slots` None: no update, the base model)."""
        previous = self._mask
        self._mask = None if slots is None else (slots.unsqueeze(-1) == self._column_slot).to(self._dtype)
        try:
            yield
        finally:
            self._mask = previous

    def _hook(self, module_name: str):
        def add_update(module: nn.Module, args: tuple[torch.Tensor, ...], output: torch.Tensor):
            mask = self._mask
            stack = self._stacks.get(module_name)  # looked up here: compiled code guards on it
            if mask is None or stack is None:
                return None
            return output + stack.delta(args[0], mask)

        return add_update
