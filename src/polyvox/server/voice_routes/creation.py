"""Creating a voice from a request's fields: OpenAI's two forms, from an audio sample (`name`,
`audio_sample`, `consent`: the id of a consent recording) and from a text prompt (`type=prompt`,
`name`, `prompt`, optional `script_hint`; `model` is ignored), plus polyvox's own fields as aliases
(`audio` and uttera-tts-vllm's file fields, `consent=true`, `transcript`, `cfg_value`,
`inference_timesteps`, `emotion`: the voice's default). A prompt voice is designed by the back end as
one request in flight: it takes an admission slot and runs under the request deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import anyio
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request

from polyvox.backends.base import Backend
from polyvox.backends.errors import BackendError
from polyvox.server.errors import APIError, DeadlineExceeded
from polyvox.server.protocol import REF_TEXT_FIELDS
from polyvox.server.speech.admission import Overloaded
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.ownership import check_citable, check_replaceable, new_access
from polyvox.voices.detail import VoiceDetail
from polyvox.voices.registry import VoiceRegistry, stores_designed_voices
from polyvox.voices.store import VoiceEntry, check_text

AUDIO_FIELDS = ("audio_sample", "audio", "file", "voice_file", "custom_voice_file", "speaker_wav")
TRANSCRIPT_FIELDS = ("transcript", "text", *REF_TEXT_FIELDS)
CONSENT_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})
MAX_PROMPT_CHARS = 1000
MAX_SCRIPT_CHARS = 500  # more than a frozen prompt (voice_freeze_max_patches) can say


def _field(fields: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    return next((fields[name] for name in names if fields.get(name) not in (None, "")), None)


async def create_from_fields(
    request: Request, registry: VoiceRegistry, service: SpeechService, fields: Mapping[str, Any]
) -> tuple[VoiceDetail, bool]:
    """The voice the fields describe, stored (the back end of `service` checks a clip, or designs the
    voice as one of its requests); and whether it replaced one of the same id."""
    name = _field(fields, ("name", "voice", "id"))
    if not isinstance(name, str):
        raise APIError(400, "name: a voice name is required", param="name", code="missing_required_parameter")
    await check_replaceable(request, registry, name)
    owner, shared = new_access(request, fields)  # the request's key's; others' too if `shared`
    if _creation_type(fields) == "prompt":
        return await _from_prompt(service, registry, name, fields, owner, shared)
    return await _from_sample(request, registry, service, name, fields, owner, shared)


def _creation_type(fields: Mapping[str, Any]) -> str:
    kind = fields.get("type")
    if kind in (None, ""):
        has_audio = any(isinstance(fields.get(f), UploadFile) for f in AUDIO_FIELDS)
        return "prompt" if fields.get("prompt") not in (None, "") and not has_audio else "audio_sample"
    if kind not in ("audio_sample", "prompt"):
        raise APIError(400, "type: 'audio_sample' or 'prompt'", param="type", code="invalid_value")
    return kind


async def _from_sample(
    request: Request,
    registry: VoiceRegistry,
    service: SpeechService,
    name: str,
    fields: Mapping[str, Any],
    owner: str | None,
    shared: bool,
) -> tuple[VoiceDetail, bool]:
    """A voice from an uploaded clip, stored only when the served back end could speak with it."""
    param = next((f for f in AUDIO_FIELDS if isinstance(fields.get(f), UploadFile)), None)
    if param is None:
        raise APIError(
            400,
            "audio_sample: an audio file is required (or type=prompt with a prompt)",
            param="audio_sample",
            code="missing_required_parameter",
        )
    upload: UploadFile = fields[param]
    entry_fields = {
        "audio": upload.filename or "upload",
        "transcript": _field(fields, TRANSCRIPT_FIELDS),
        "cfg_value": _field(fields, ("cfg_value",)),
        "inference_timesteps": _field(fields, ("inference_timesteps",)),
        "emotion": _field(fields, ("emotion",)),
        "owner": owner,
        "shared": shared,
    }
    consent = _field(fields, ("consent",))
    if isinstance(consent, str) and consent.strip().lower() not in CONSENT_WORDS:
        entry_fields["consent_id"] = consent.strip()  # OpenAI's: the id of a consent recording
        await anyio.to_thread.run_sync(check_citable, request, registry, consent.strip())
    else:
        entry_fields["consent"] = consent
    try:
        entry = VoiceEntry.model_validate({k: v for k, v in entry_fields.items() if v is not None})
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    data = await upload.read()
    backend, cold_start = service.backend, service.cold_start
    if cold_start is None or not backend.info.capabilities.cloning:
        return await _add_clip(registry, name, data, upload.filename or "", entry, backend, param)
    # idle_unload_s / load_on_demand: the back end checks the clip, so a cold one loads now, and the upload
    # is in flight meanwhile (an idle unload waits for it, a drain too)
    with service.accept():
        await cold_start.loaded()
        return await _add_clip(registry, name, data, upload.filename or "", entry, backend, param)


async def _add_clip(
    registry: VoiceRegistry,
    name: str,
    data: bytes,
    filename: str,
    entry: VoiceEntry,
    backend: Backend,
    param: str,
) -> tuple[VoiceDetail, bool]:
    try:
        return await registry.add(name, data, filename, entry, backend, param)
    except BackendError as exc:  # the back end that checks a clip against its model is not up
        raise APIError(
            503,
            f"the engine cannot check the voice now ({exc}); try again once GET /ready is 200",
            code="engine_not_ready",
            headers={"Retry-After": "5"},
        ) from exc


async def _from_prompt(
    service: SpeechService,
    registry: VoiceRegistry,
    name: str,
    fields: Mapping[str, Any],
    owner: str | None,
    shared: bool,
) -> tuple[VoiceDetail, bool]:
    """Design the voice with the back end, as one request in flight (an admission slot, the deadline)."""
    prompt = check_text(fields.get("prompt"), "prompt", MAX_PROMPT_CHARS, multiline=True)
    script = fields.get("script_hint")
    script = None if script is None else check_text(script, "script_hint", MAX_SCRIPT_CHARS, multiline=True)
    backend = service.backend
    if not stores_designed_voices(backend.info):
        return await registry.design(name, prompt, script, backend, owner, shared)  # a 422 first
    with service.accept():  # 503 while draining; in flight (a drain waits for it) from here
        if service.cold_start is not None:  # idle_unload_s / load_on_demand: a cold back end loads now
            await service.cold_start.loaded()
        if not backend.ready:
            raise APIError(
                503,
                "the engine is not ready (GET /ready says why)",
                code="engine_not_ready",
                headers={"Retry-After": "5"},
            )
        timeout_s = service.settings.request_timeout_s
        admitted = False
        try:
            async with asyncio.timeout(timeout_s):
                await service.admission.acquire()
                admitted = True
                return await registry.design(name, prompt, script, backend, owner, shared)
        except Overloaded as exc:
            raise APIError(
                429, str(exc), code="rate_limit_exceeded", headers={"Retry-After": str(exc.retry_after_s)}
            ) from exc
        except TimeoutError as exc:
            raise DeadlineExceeded(timeout_s) from exc
        finally:
            if admitted:
                service.admission.release()
