"""Who the Wyoming port's requests come from. Wyoming has no authentication, so the operator names a key
(`wyoming_api_key_name`) whose voices, limits and usage they count against; looked up for every request,
so a key revoked or made since is seen as HTTP sees it."""

from __future__ import annotations

from polyvox.server.errors import APIError, keys_unavailable
from polyvox.server.tenancy.caller import ANONYMOUS, SETTINGS_KEY_NAME, Caller
from polyvox.server.tenancy.key_table import FRESH_S, KeyTable

# Without a named key on a server that requires keys: as a key of the settings that is not an admin's
# (unlimited; every key's voices and shared ones, never another key's private ones).
SETTINGS_CALLER = Caller(SETTINGS_KEY_NAME, admin=False)


async def wyoming_caller(keys: KeyTable, key_name: str | None) -> Caller:
    """The caller of a Wyoming request now; APIError when the named key cannot be used."""
    await keys.refresh(FRESH_S)
    if key_name is None:
        return SETTINGS_CALLER if keys.required else ANONYMOUS
    if keys.problem is not None:
        raise keys_unavailable(keys.problem)
    named = {key.name: key for key in keys.keys()}  # noqa: SIM118 (a KeyTable, not a dict)
    key = named.get(key_name)
    if key is None:
        raise APIError(
            503,
            f"wyoming_api_key_name: no key is named {key_name!r} (polyvox keys create {key_name})",
            code="wyoming_key_not_found",
        )
    if not key.allows("speech"):
        raise APIError(403, f"the key {key_name!r} lacks the 'speech' scope", code="insufficient_scope")
    return Caller.named(key)
