"""Private voices and consents, in one place: one made with a named key belongs to that key (its
`owner`, the key's id); only that key and admin keys list, speak, rename or delete it. Made `shared`,
other keys may list and speak it (cite a shared consent) too, but changing, replacing and deleting it
stay with its owner and admin keys (403 `not_owner`; an upload over its name is 409). To any other
key a private one does not exist: the voice routes answer 404 as for an unknown id, speech answers as
for an unknown voice (400 `voice_not_found`), and since a request is refused before its cache lookup, no
key is ever served audio of a voice it cannot use. Builtin and registered voices (in `voices.json`
with no owner) and those made with the settings' keys are every key's to use, and admin keys' to
change."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
from starlette.requests import HTTPConnection

from polyvox.server.errors import APIError
from polyvox.server.tenancy.caller import Caller, caller_of
from polyvox.voices.consents import ConsentRecord
from polyvox.voices.errors import (
    ConsentNotFound,
    VoiceConflict,
    VoiceNotFound,
    uncitable_consent,
    unknown_voice,
)
from polyvox.voices.registry import ResolvedVoice, VoiceRegistry

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


def may_use(caller: Caller, owner: str | None, shared: bool = False) -> bool:
    """Whether the caller may list, read and speak a voice or consent (and cite a consent)."""
    return owner is None or shared or caller.admin or caller.key_id == owner


def may_change(caller: Caller, owner: str | None) -> bool:
    """Whether the caller may rename, replace or delete it: its owner and admin keys only (a shared
    one stays its creator's; an ownerless one, registered or made with the settings' keys, the admins')."""
    return caller.admin or (owner is not None and caller.key_id == owner)


def visible_consent(connection: HTTPConnection) -> Callable[[ConsentRecord], bool]:
    """Which consents the request's caller may see."""
    caller = caller_of(connection)
    return lambda record: may_use(caller, record.owner, record.shared)


def new_access(connection: HTTPConnection, fields: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The owner of a voice or consent the request makes (its named key's id; None for the settings'
    keys and an open server: every key's) and whether the `shared` field lets other keys use it."""
    shared = fields.get("shared")
    if isinstance(shared, str):
        word = SHARED_WORDS.get(shared.strip().lower())
        if word is None:
            raise APIError(400, "shared: true or false", param="shared", code="invalid_value")
        shared = word
    if shared not in (None, True, False):
        raise APIError(400, "shared: true or false", param="shared", code="invalid_value")
    return caller_of(connection).key_id, bool(shared)


async def check_voice(connection: HTTPConnection, registry: VoiceRegistry, voice_id: str) -> None:
    """VoiceNotFound (404) for a stored voice the caller may not use."""
    if not may_use(caller_of(connection), *await _access(registry, voice_id)):
        raise VoiceNotFound(f"voice {voice_id!r} not found", param="voice_id")


async def check_changeable(connection: HTTPConnection, registry: VoiceRegistry, voice_id: str) -> None:
    """For renaming and deleting: 404 for a voice the caller may not use, 403 for one it may only
    use (shared by another key, or every key's)."""
    caller = caller_of(connection)
    owner, shared = await _access(registry, voice_id)
    if not may_use(caller, owner, shared):
        raise VoiceNotFound(f"voice {voice_id!r} not found", param="voice_id")
    if registry.is_stored(voice_id) and not may_change(caller, owner):
        raise not_yours(f"voice {voice_id!r}", owner, "voice_id")


def not_yours(what: str, owner: str | None, param: str) -> APIError:
    whose = "is shared by another key" if owner is not None else "belongs to every key"
    return APIError(
        403,
        f"{what} {whose}: only the key that made it or an admin key may change or delete it",
        param=param,
        code="not_owner",
    )


def visible_voices(connection: HTTPConnection, registry: VoiceRegistry, ids: list[str]) -> set[str]:
    """Of `ids`, those the caller may list."""
    caller = caller_of(connection)
    return {voice_id for voice_id in ids if may_use(caller, *registry.access_of(voice_id))}


async def check_replaceable(connection: HTTPConnection, registry: VoiceRegistry, voice_id: str) -> None:
    """A new voice whose id is a stored voice the caller may not change would replace it: 409, never
    that (a builtin name is refused by the registry itself)."""
    owner, _ = await _access(registry, voice_id)
    if registry.is_stored(voice_id) and not may_change(caller_of(connection), owner):
        raise VoiceConflict(f"the voice name {voice_id!r} is taken", param="name")


def check_speakable(caller: Caller, voice: ResolvedVoice) -> None:
    """For speech (HTTP, WebSocket, Wyoming), on the voice as it was found: one the caller may not use
    is refused as an unknown one, with the same words."""
    if not may_use(caller, voice.owner, voice.shared):
        raise unknown_voice(voice.name)


def check_citable(connection: HTTPConnection, registry: VoiceRegistry, consent_id: str) -> None:
    """A new voice citing a consent the caller may not use: refused as citing an unknown one (blocking)."""
    try:
        check_consent(connection, registry, consent_id)
    except ConsentNotFound as exc:
        raise uncitable_consent(consent_id) from exc


def check_consent(
    connection: HTTPConnection, registry: VoiceRegistry, consent_id: str, change: bool = False
) -> None:
    """ConsentNotFound (404) for a consent the caller may not use; with `change` (renaming,
    deleting), 403 for one it may only use (blocking: run in a thread)."""
    caller = caller_of(connection)
    record = registry.consent_store().get(consent_id)
    if not may_use(caller, record.owner, record.shared):
        raise ConsentNotFound(f"consent recording {consent_id!r} not found", param="consent_id")
    if change and not may_change(caller, record.owner):
        raise not_yours(f"consent recording {consent_id!r}", record.owner, "consent_id")


async def _access(registry: VoiceRegistry, voice_id: str) -> tuple[str | None, bool]:
    if not registry.is_stored(voice_id) and not registry.is_reserved(
        voice_id
    ):  # made by another server sharing the directory, maybe
        await anyio.to_thread.run_sync(registry.refresh)
    return registry.access_of(voice_id)
