"""`GET /elevenlabs/v1/voices`: the voices the caller may speak with, as ElevenLabs lists them (a
`voice_id` is a polyvox voice name: builtin ones are ElevenLabs' `premade`, stored ones `cloned`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from polyvox.backends.base import Backend
from polyvox.server.deps import get_backend
from polyvox.server.elevenlabs.http_routes import PREFIX
from polyvox.server.tenancy.ownership import visible_voices
from polyvox.server.voice_routes.voices import get_fresh_registry
from polyvox.voices.registry import VoiceRegistry

router = APIRouter(prefix=PREFIX, tags=["elevenlabs"])


@router.get("/v1/voices")
async def list_voices(
    request: Request,
    registry: VoiceRegistry = Depends(get_fresh_registry),
    backend: Backend = Depends(get_backend),
) -> dict[str, Any]:
    infos = registry.infos(backend)
    shown = visible_voices(request, registry, [info.id for info in infos])
    voices: list[dict[str, Any]] = [
        {
            "voice_id": info.id,
            "name": info.name,
            "category": "premade" if info.source == "builtin" else "cloned",
            "description": info.description,
            "labels": {},
        }
        for info in infos
        if info.id in shown
    ]
    return {"voices": voices, "has_more": False}
