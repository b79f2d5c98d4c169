"""The LoRA adapters' admin API under `/admin/lora`: list, load (or replace) and unload adapters at run
time, on every engine rank. A loaded adapter is also a voice of its name. `/admin/*` needs an admin key
when admin keys are configured (see `server.auth`). An adapter that does not fit the model answers 400
with the back end's reason; a back end that serves no adapters, 404."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from polyvox.backends.base import AdapterInfo, Backend
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.server.deps import get_backend, get_registry, get_settings
from polyvox.server.errors import APIError
from polyvox.settings import Settings
from polyvox.voices.registry import VoiceRegistry
from polyvox.voices.store import NAME_PATTERN

router = APIRouter(prefix="/admin/lora", tags=["admin"])


class AdapterLoad(BaseModel):
    name: str = Field(pattern=f"^{NAME_PATTERN.pattern}$", description="The adapter's name (and voice name).")
    path: str = Field(min_length=1, description="Directory the official fine-tuning wrote, on the server.")


class AdapterItem(BaseModel):
    name: str
    path: str
    rank: int
    layers: int = Field(description="Linear layers it adapts.")
    digest: str = Field(description="Hash of its weights and config.")

    @classmethod
    def of(cls, info: AdapterInfo) -> AdapterItem:
        return cls(name=info.name, path=info.path, rank=info.rank, layers=info.layers, digest=info.digest)


class AdapterList(BaseModel):
    object: Literal["list"] = "list"
    data: list[AdapterItem]


class AdapterUnloaded(BaseModel):
    name: str
    deleted: bool = True


def _serving_adapters(backend: Backend) -> Backend:
    if not backend.info.capabilities.lora:
        raise APIError(
            404,
            f"the {backend.info.name} engine serves no LoRA adapters here (a VoxCPM engine does when the "
            "server starts with --lora or --enable-lora)",
            code="not_found",
        )
    return backend


def _changeable(backend: Backend, settings: Settings) -> Backend:
    """The back end, where adapters may change at run time: not behind several API processes, each of
    which keeps its own list of what the ranks hold (and a restarted rank loads only those named at start)."""
    _serving_adapters(backend)
    if settings.api_server_count > 1:
        raise APIError(
            409,
            "adapters cannot be loaded or unloaded at run time with api_server_count > 1: name them at "
            "start with --lora NAME=DIR",
            code="adapters_fixed_at_start",
        )
    return backend


@router.get("", response_model=AdapterList)
async def list_adapters(backend: Backend = Depends(get_backend)) -> AdapterList:
    """Every loaded adapter, by name."""
    adapters = _serving_adapters(backend).adapters()
    return AdapterList(data=[AdapterItem.of(adapters[name]) for name in sorted(adapters)])


@router.post("", response_model=AdapterItem, status_code=201)
async def load_adapter(
    item: AdapterLoad,
    backend: Backend = Depends(get_backend),
    settings: Settings = Depends(get_settings),
    voices: VoiceRegistry = Depends(get_registry),
) -> AdapterItem:
    """Load adapter `name` from `path` on every engine rank, replacing one of that name."""
    _changeable(backend, settings)
    if voices.is_reserved(item.name) or voices.is_stored(item.name):
        raise APIError(409, f"{item.name!r} is already a voice's name", param="name", code="voice_conflict")
    try:
        return AdapterItem.of(await backend.load_adapter(item.name, item.path))
    except BackendInputError as exc:
        raise APIError(400, exc.message, param=exc.param or "path", code=exc.code) from exc
    except BackendError as exc:
        raise APIError(503, str(exc), code="engine_not_ready", headers={"Retry-After": "5"}) from exc


@router.delete("/{name}", response_model=AdapterUnloaded)
async def unload_adapter(
    name: str, backend: Backend = Depends(get_backend), settings: Settings = Depends(get_settings)
) -> AdapterUnloaded:
    """Unload adapter `name` (requests already speaking with it finish with it); 404 when none is loaded."""
    if not await _changeable(backend, settings).unload_adapter(name):
        raise APIError(404, f"no LoRA adapter {name!r} is loaded", param="name", code="not_found")
    return AdapterUnloaded(name=name)
