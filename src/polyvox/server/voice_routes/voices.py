"""The voice API: list voices (Open WebUI's shape on `/v1/audio/voices`, uttera-tts-vllm's on
`/v1/voices`), show one, create one, rename one (`POST .../{id}` with a new `name`), delete one,
and `POST /admin/reload-voices`.

Creating takes OpenAI's two forms, from an audio sample or from a text prompt (see
`creation`), as JSON or multipart. Answers are OpenAI's `audio.voice` objects with polyvox's
fields added.

Changing voices needs an admin key: `auth.AuthMiddleware` guards every non-read method under
`/v1/audio/voices` and everything under `/admin/`, before routing. Voice errors are translated to HTTP
here, once."""

from __future__ import annotations

import logging

import anyio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from polyvox.backends.base import Backend
from polyvox.server.deps import get_backend, get_fresh_registry, get_registry, get_service, get_settings
from polyvox.server.errors import error_response
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import (
    VoiceCard,
    VoiceDeleted,
    VoiceList,
    VoicesReloaded,
    WebUIVoice,
    WebUIVoiceList,
)
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.ownership import check_changeable, check_voice, visible_voices
from polyvox.server.voice_routes.creation import create_from_fields
from polyvox.server.voice_routes.errors import voice_api_error
from polyvox.server.voice_routes.fields import read_fields
from polyvox.settings import Settings
from polyvox.voices.detail import VoiceDetail
from polyvox.voices.errors import VoiceError
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)
router = APIRouter(tags=["voices"])


def install_voice_errors(app: FastAPI, metrics: Metrics) -> None:
    """Answer every VoiceError (from the voice API or a speech request) in OpenAI's error shape, counted
    in `metrics`."""

    async def on_voice_error(request: Request, exc: VoiceError) -> JSONResponse:
        error = voice_api_error(exc)
        metrics.errors.labels(type=error.code or error.type).inc()
        return error_response(error)

    app.add_exception_handler(VoiceError, on_voice_error)  # type: ignore[arg-type]  # typed for Exception


async def load_voices(registry: VoiceRegistry) -> None:
    """At start: sweep what interrupted writes left, then load the registered voices. `create_app` has
    checked `voices.json` already; one broken since is logged once by the registry and named by
    `/ready` (`VoiceRegistry.problem`)."""
    try:
        removed = await anyio.to_thread.run_sync(registry.sweep)
        if removed:
            shown = ", ".join(str(p) for p in removed[:10])
            log.info("voices: removed %d leftover(s) of interrupted writes: %s", len(removed), shown)
        report = await anyio.to_thread.run_sync(registry.reload)
    except VoiceError as exc:
        if registry.problem is None:  # else the registry has logged it
            log.error("registered voices not loaded: %s", exc)
        return
    if report.voices:
        log.info("registered voices: %s", ", ".join(report.voices))


def _visible(request: Request, registry: VoiceRegistry, backend: Backend) -> list[VoiceDetail]:
    """The voices the request's key may use (another key's private voices are left out)."""
    infos = registry.infos(backend)
    shown = visible_voices(request, registry, [info.id for info in infos])
    return [info for info in infos if info.id in shown]


@router.get("/v1/audio/voices", response_model=WebUIVoiceList)
async def list_voices_webui(
    request: Request,
    registry: VoiceRegistry = Depends(get_fresh_registry),
    backend: Backend = Depends(get_backend),
) -> WebUIVoiceList:
    infos = _visible(request, registry, backend)
    return WebUIVoiceList(voices=[WebUIVoice(id=i.id, name=i.name) for i in infos])


@router.get("/v1/voices", response_model=VoiceList)
async def list_voices(
    request: Request,
    registry: VoiceRegistry = Depends(get_fresh_registry),
    backend: Backend = Depends(get_backend),
) -> VoiceList:
    infos = _visible(request, registry, backend)
    cards = [VoiceCard(id=i.id, name=i.name, source=i.source) for i in infos]
    return VoiceList(data=cards, default="alloy")


@router.get("/v1/audio/voices/{voice_id}", response_model=VoiceDetail)
async def get_voice(
    voice_id: str,
    request: Request,
    registry: VoiceRegistry = Depends(get_fresh_registry),
    backend: Backend = Depends(get_backend),
) -> VoiceDetail:
    await check_voice(request, registry, voice_id)
    return registry.info(voice_id, backend)


@router.post("/v1/audio/voices", response_model=VoiceDetail, status_code=201)
async def create_voice(
    request: Request,
    registry: VoiceRegistry = Depends(get_registry),
    service: SpeechService = Depends(get_service),
) -> JSONResponse:
    """Create a voice from an audio sample (1-60 s of speech by default, citing the speaker's consent)
    or from a text prompt; a name that is a voice id again replaces that voice (200)."""
    fields = await read_fields(request, service.settings.max_request_bytes)
    info, replaced = await create_from_fields(request, registry, service, fields)
    return JSONResponse(info.model_dump(), status_code=200 if replaced else 201)


@router.post("/v1/audio/voices/{voice_id}", response_model=VoiceDetail)
async def rename_voice(
    voice_id: str,
    request: Request,
    registry: VoiceRegistry = Depends(get_fresh_registry),
    settings: Settings = Depends(get_settings),
) -> VoiceDetail:
    """Change a stored voice's display `name` (JSON or form); its id, clip and prompt hash stay."""
    await check_changeable(request, registry, voice_id)
    fields = await read_fields(request, settings.max_request_bytes)
    return await anyio.to_thread.run_sync(registry.rename, voice_id, fields.get("name"))


@router.delete("/v1/audio/voices/{voice_id}", response_model=VoiceDeleted)
async def delete_voice(
    voice_id: str, request: Request, registry: VoiceRegistry = Depends(get_fresh_registry)
) -> VoiceDeleted:
    await check_changeable(request, registry, voice_id)
    await anyio.to_thread.run_sync(registry.delete, voice_id)
    return VoiceDeleted(id=voice_id)


@router.post("/admin/reload-voices", response_model=VoicesReloaded)
async def reload_voices(registry: VoiceRegistry = Depends(get_registry)) -> VoicesReloaded:
    """Read `voices.json` and its clips again, without a restart."""
    report = await anyio.to_thread.run_sync(registry.reload)
    return VoicesReloaded(voices=report.voices, problems=report.problems)
