"""OpenAI's voice consent API: `POST /v1/audio/voice_consents` (multipart `name`, `language`,
`recording`), `GET` one or a page of them (cursor pagination: `after`, `limit`), `POST .../{id}` to
rename one, `DELETE .../{id}`. A voice created from an audio sample cites a consent by id.

Like voices, changing consents needs an admin key (auth.VOICE_ADMIN_PREFIXES); reading them needs
any key."""

from __future__ import annotations

from pathlib import Path

import anyio
from fastapi import APIRouter, Depends, Query, Request
from starlette.datastructures import UploadFile

from polyvox.server.deps import get_registry, get_settings
from polyvox.server.errors import APIError
from polyvox.server.protocol import VoiceConsent, VoiceConsentDeleted, VoiceConsentList
from polyvox.server.tenancy.ownership import check_consent, new_access, visible_consent
from polyvox.server.voice_routes.fields import read_fields
from polyvox.settings import Settings
from polyvox.voices.clips import load_clip
from polyvox.voices.consents import ConsentRecord, check_language
from polyvox.voices.registry import VoiceRegistry
from polyvox.voices.store import check_text

router = APIRouter(prefix="/v1/audio/voice_consents", tags=["voices"])


def _consent(record: ConsentRecord) -> VoiceConsent:
    return VoiceConsent(
        id=record.id, name=record.name, language=record.language, created_at=record.created_at
    )


@router.post("", response_model=VoiceConsent)
async def create_consent(
    request: Request,
    registry: VoiceRegistry = Depends(get_registry),
    settings: Settings = Depends(get_settings),
) -> VoiceConsent:
    """Store the speaker's consent recording (checked like any clip) under a new id `cons_...`."""
    consents = registry.consent_store()
    fields = await read_fields(request, settings.max_request_bytes)
    name = check_text(fields.get("name"), "name")
    language = check_language(fields.get("language"))
    upload = fields.get("recording")
    if not isinstance(upload, UploadFile):
        raise APIError(
            400, "recording: an audio file is required", param="recording", code="missing_required_parameter"
        )
    data = await upload.read()
    await anyio.to_thread.run_sync(load_clip, data, registry.limits, registry.clip_rate, "recording")
    suffix = Path(upload.filename or "").suffix
    owner, shared = new_access(request, fields)  # the request's key's; others' too if `shared`
    record = await anyio.to_thread.run_sync(consents.create, name, language, data, suffix, owner, shared)
    return _consent(record)


@router.get("", response_model=VoiceConsentList)
async def list_consents(
    request: Request,
    after: str | None = None,
    limit: int = Query(20, ge=1, le=100),
    registry: VoiceRegistry = Depends(get_registry),
) -> VoiceConsentList:
    """Newest first; `after` is the last id of the previous page."""
    page = registry.consent_store().page
    records, has_more = await anyio.to_thread.run_sync(page, after, limit, visible_consent(request))
    data = [_consent(r) for r in records]
    first, last = (data[0].id, data[-1].id) if data else (None, None)
    return VoiceConsentList(data=data, first_id=first, last_id=last, has_more=has_more)


@router.get("/{consent_id}", response_model=VoiceConsent)
async def get_consent(
    consent_id: str, request: Request, registry: VoiceRegistry = Depends(get_registry)
) -> VoiceConsent:
    await anyio.to_thread.run_sync(check_consent, request, registry, consent_id)
    return _consent(await anyio.to_thread.run_sync(registry.consent_store().get, consent_id))


@router.post("/{consent_id}", response_model=VoiceConsent)
async def update_consent(
    consent_id: str,
    request: Request,
    registry: VoiceRegistry = Depends(get_registry),
    settings: Settings = Depends(get_settings),
) -> VoiceConsent:
    """Rename a consent (its only changeable field; the recording stays as it was)."""
    await anyio.to_thread.run_sync(check_consent, request, registry, consent_id, True)
    fields = await read_fields(request, settings.max_request_bytes)
    name = check_text(fields.get("name"), "name")
    return _consent(await anyio.to_thread.run_sync(registry.consent_store().rename, consent_id, name))


@router.delete("/{consent_id}", response_model=VoiceConsentDeleted)
async def delete_consent(
    consent_id: str, request: Request, registry: VoiceRegistry = Depends(get_registry)
) -> VoiceConsentDeleted:
    """Delete a consent and its recording; 409 while a voice cites it."""
    await anyio.to_thread.run_sync(check_consent, request, registry, consent_id, True)
    await anyio.to_thread.run_sync(registry.delete_consent, consent_id)
    return VoiceConsentDeleted(id=consent_id)
