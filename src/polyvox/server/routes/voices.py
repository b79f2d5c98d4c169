"""The voice API: list voices (Open WebUI's shape on `/v1/audio/voices`, the seed system's on
`/v1/voices`), show one, upload one (multipart: `name`, `audio`, optional `transcript`, `consent`,
optional `cfg_value` / `inference_timesteps`), delete one, and `POST /admin/reload-voices`.

Changing voices needs an admin key: the app-wide `auth.authorize` dependency guards every non-read
method under `/v1/audio/voices` and everything under `/admin/`. Voice errors are translated to HTTP
here, once."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import anyio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from polyvox.server.errors import APIError, error_response
from polyvox.server.parsing import read_form
from polyvox.server.protocol import (
    VoiceCard,
    VoiceDeleted,
    VoiceDetail,
    VoiceList,
    VoicesReloaded,
    WebUIVoice,
    WebUIVoiceList,
)
from polyvox.voices.errors import (
    InvalidVoiceAudio,
    InvalidVoiceName,
    VoiceConflict,
    VoiceError,
    VoiceNotFound,
    VoiceStorageUnavailable,
    VoiceTooLarge,
    VoiceUnsupported,
)
from polyvox.voices.registry import VoiceInfo, VoiceRegistry
from polyvox.voices.store import VoiceEntry

log = logging.getLogger(__name__)
router = APIRouter(tags=["voices"])

AUDIO_FIELDS = ("audio", "file", "voice_file", "custom_voice_file", "speaker_wav")
TRANSCRIPT_FIELDS = ("transcript", "text", "ref_text", "reference_text", "prompt_text")

# Most specific class first.
_STATUS: tuple[tuple[type[VoiceError], int], ...] = (
    (VoiceNotFound, 404),
    (VoiceConflict, 409),
    (VoiceTooLarge, 413),
    (VoiceUnsupported, 422),
    (VoiceStorageUnavailable, 503),
    (InvalidVoiceName, 400),
    (InvalidVoiceAudio, 400),
    (VoiceError, 400),
)


def voice_api_error(exc: VoiceError) -> APIError:
    status = next(code for cls, code in _STATUS if isinstance(exc, cls))
    return APIError(status, exc.message, param=exc.param, code=exc.code)


def install_voice_errors(app: FastAPI) -> None:
    """Answer every VoiceError (from the voice API or a speech request) in OpenAI's error shape."""

    async def on_voice_error(request: Request, exc: VoiceError) -> JSONResponse:
        error = voice_api_error(exc)
        metrics = getattr(request.app.state, "metrics", None)
        if metrics is not None:
            metrics.errors.labels(type=error.code or error.type).inc()
        return error_response(error)

    app.add_exception_handler(VoiceError, on_voice_error)


async def load_voices(app: FastAPI) -> None:
    """Load the registered voices at start; a broken `voices.json` is logged, not fatal."""
    try:
        report = await anyio.to_thread.run_sync(app.state.voices.reload)
    except VoiceError as exc:
        log.error("registered voices not loaded: %s", exc)
        return
    if report.voices:
        log.info("registered voices: %s", ", ".join(report.voices))


def get_registry(request: Request) -> VoiceRegistry:
    return request.app.state.voices


def _display_name(info: VoiceInfo) -> str:
    return info.id.capitalize() if info.source == "builtin" else info.id


def _detail(info: VoiceInfo) -> VoiceDetail:
    return VoiceDetail(**dataclasses.asdict(info), name=_display_name(info))


@router.get("/v1/audio/voices", response_model=WebUIVoiceList)
async def list_voices_webui(
    request: Request, registry: VoiceRegistry = Depends(get_registry)
) -> WebUIVoiceList:
    infos = registry.infos(request.app.state.engine)
    return WebUIVoiceList(voices=[WebUIVoice(id=i.id, name=_display_name(i)) for i in infos])


@router.get("/v1/voices", response_model=VoiceList)
async def list_voices(request: Request, registry: VoiceRegistry = Depends(get_registry)) -> VoiceList:
    infos = registry.infos(request.app.state.engine)
    cards = [VoiceCard(id=i.id, name=_display_name(i), source=i.source) for i in infos]
    return VoiceList(data=cards, default="alloy")


@router.get("/v1/audio/voices/{voice_id}", response_model=VoiceDetail)
async def get_voice(voice_id: str, registry: VoiceRegistry = Depends(get_registry)) -> VoiceDetail:
    return _detail(registry.info(voice_id))


def _field(form: Any, names: tuple[str, ...]) -> Any:
    return next((form[name] for name in names if form.get(name) not in (None, "")), None)


@router.post("/v1/audio/voices", response_model=VoiceDetail, status_code=201)
async def create_voice(request: Request, registry: VoiceRegistry = Depends(get_registry)) -> JSONResponse:
    """Store a voice from a clip (1-60 s of speech by default) under `name`; the same name again
    replaces it (200). Needs `consent=true`: the speaker agreed to be cloned."""
    form = await read_form(request, request.app.state.settings.max_request_bytes)
    name = _field(form, ("name", "voice", "id"))
    if not isinstance(name, str):
        raise APIError(400, "name: a voice name is required", param="name", code="missing_required_parameter")
    upload = _field(form, AUDIO_FIELDS)
    if not isinstance(upload, UploadFile):
        raise APIError(
            400, "audio: an audio file is required", param="audio", code="missing_required_parameter"
        )
    fields = {
        "audio": upload.filename or "upload",
        "transcript": _field(form, TRANSCRIPT_FIELDS),
        "consent": _field(form, ("consent",)),
        "cfg_value": _field(form, ("cfg_value",)),
        "inference_timesteps": _field(form, ("inference_timesteps",)),
    }
    try:
        entry = VoiceEntry.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    data = await upload.read()
    info, replaced = await anyio.to_thread.run_sync(registry.add, name, data, upload.filename or "", entry)
    return JSONResponse(_detail(info).model_dump(), status_code=200 if replaced else 201)


@router.delete("/v1/audio/voices/{voice_id}", response_model=VoiceDeleted)
async def delete_voice(voice_id: str, registry: VoiceRegistry = Depends(get_registry)) -> VoiceDeleted:
    await anyio.to_thread.run_sync(registry.delete, voice_id)
    return VoiceDeleted(id=voice_id)


@router.post("/admin/reload-voices", response_model=VoicesReloaded)
async def reload_voices(registry: VoiceRegistry = Depends(get_registry)) -> VoicesReloaded:
    """Read `voices.json` and its clips again, without a restart."""
    report = await anyio.to_thread.run_sync(registry.reload)
    return VoicesReloaded(voices=report.voices, problems=report.problems)
