"""Private voices and consents: one made with a named key belongs to that key (its `owner`, the
key's id) unless made `shared`; only that key and admin keys list, speak, rename or delete it. To any
other key it does not exist: the voice routes answer 404 as for an unknown id, speech answers as for an
unknown voice (400 `voice_not_found`), and since a request is refused before its cache lookup, no
key is ever served audio of a voice it cannot use. Builtin and registered voices (in `voices.json`
with no owner) are every key's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
from starlette.requests import HTTPConnection

from polyvox.server.app_state import app_state
from polyvox.server.errors import APIError
from polyvox.server.tenancy.caller import Caller, caller_of
from polyvox.voices.errors import ConsentNotFound, VoiceConflict, VoiceNotFound, uncitable_consent
from polyvox.voices.registry import VoiceRegistry

SHARED_WORDS = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}


def may_use(caller: Caller, owner: str | None) -> bool:
    return owner is None or caller.admin or caller.key_id == owner


def owners(connection: HTTPConnection) -> Callable[[str | None], bool]:
    """Which owners' voices and consents the request's caller may see."""
    caller = caller_of(connection)
    return lambda owner: may_use(caller, owner)


def new_owner(connection: HTTPConnection, fields: Mapping[str, Any]) -> str | None:
    """The owner of a voice or consent the request makes: its named key's id, unless the `shared`
    field says true (or the caller has no named key: the keys of the settings make shared ones)."""
    shared = fields.get("shared")
    if isinstance(shared, str):
        word = SHARED_WORDS.get(shared.strip().lower())
        if word is None:
            raise APIError(400, "shared: true or false", param="shared", code="invalid_value")
        shared = word
    if shared not in (None, True, False):
        raise APIError(400, "shared: true or false", param="shared", code="invalid_value")
    return None if shared else caller_of(connection).key_id


async def check_voice(connection: HTTPConnection, registry: VoiceRegistry, voice_id: str) -> None:
    """VoiceNotFound (404) for a stored voice the caller may not use."""
    if not may_use(caller_of(connection), await _owner(registry, voice_id)):
        raise VoiceNotFound(f"voice {voice_id!r} not found", param="voice_id")


def visible_voices(connection: HTTPConnection, registry: VoiceRegistry, ids: list[str]) -> set[str]:
    """Of `ids`, those the caller may list."""
    caller = caller_of(connection)
    return {voice_id for voice_id in ids if may_use(caller, registry.owner_of(voice_id))}


async def check_replaceable(connection: HTTPConnection, registry: VoiceRegistry, voice_id: str) -> None:
    """A new voice whose id is a voice the caller may not use would replace it: 409, never that."""
    if not may_use(caller_of(connection), await _owner(registry, voice_id)):
        raise VoiceConflict(f"the voice name {voice_id!r} is taken", param="name")


async def check_speakable(connection: HTTPConnection, voice: str) -> None:
    """For speech (HTTP and WebSocket): a voice the caller may not use is answered as an unknown one."""
    caller = caller_of(connection)
    if caller.admin:
        return
    if not may_use(caller, await _owner(app_state(connection.app).voices, voice)):
        raise APIError(
            400,
            f"unknown voice {voice!r}; GET /v1/audio/voices lists the voices",
            param="voice",
            code="voice_not_found",
        )


def check_citable(connection: HTTPConnection, registry: VoiceRegistry, consent_id: str) -> None:
    """A new voice citing a consent the caller may not use: refused as citing an unknown one (blocking)."""
    try:
        check_consent(connection, registry, consent_id)
    except ConsentNotFound as exc:
        raise uncitable_consent(consent_id) from exc


def check_consent(connection: HTTPConnection, registry: VoiceRegistry, consent_id: str) -> None:
    """ConsentNotFound (404) for a consent the caller may not use (blocking: run in a thread)."""
    record = registry.consent_store().get(consent_id)
    if not may_use(caller_of(connection), record.owner):
        raise ConsentNotFound(f"consent recording {consent_id!r} not found", param="consent_id")


async def _owner(registry: VoiceRegistry, voice_id: str) -> str | None:
    if not registry.is_stored(voice_id) and not registry.is_reserved(
        voice_id
    ):  # made by another server sharing the directory, maybe
        await anyio.to_thread.run_sync(registry.refresh)
    return registry.owner_of(voice_id)
