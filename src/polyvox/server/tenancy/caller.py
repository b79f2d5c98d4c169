"""`Caller`: who a request comes from, as `server.auth` found it: a named key (its scopes and limits
apply), a key from the settings (`api_keys`, `admin_api_keys`: unnamed, unlimited) or nobody (an open
server). Auth leaves it in the request's scope; routes read it with `caller_of`."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection
from starlette.types import Scope

from polyvox.server.tenancy.keys import ApiKey, KeyLimits

SETTINGS_KEY_NAME = "(settings)"  # usage and metrics label for the keys of api_keys / admin_api_keys
ANONYMOUS_NAME = "(anonymous)"  # an open server's callers
_SCOPE_FIELD = "polyvox.caller"


@dataclass(frozen=True)
class Caller:
    name: str
    admin: bool
    key: ApiKey | None = None

    @property
    def key_id(self) -> str | None:
        return self.key.id if self.key is not None else None

    @property
    def limits(self) -> KeyLimits:
        return self.key.limits if self.key is not None else KeyLimits()

    @property
    def owner(self) -> str | None:
        """What voices made by this caller are owned by: its key's id (None: nobody's, i.e. shared)."""
        return self.key_id

    @classmethod
    def named(cls, key: ApiKey) -> Caller:
        return cls(key.name, key.admin, key)


ANONYMOUS = Caller(ANONYMOUS_NAME, admin=True)  # an open server: everyone may do everything
PUBLIC = Caller(ANONYMOUS_NAME, admin=False)  # a keyless read of the lists `public_model_list` opens
# A socket handshake that brings no key where the key may come in its first message (ElevenLabs' sockets):
# it may do nothing until auth's `authorize_key` has checked that key.
KEY_TO_COME = Caller("(key in the first message)", admin=False)


def remember(scope: Scope, caller: Caller) -> None:
    scope.setdefault("state", {})[_SCOPE_FIELD] = caller


def caller_of(connection: HTTPConnection) -> Caller:
    """The caller auth found for this request (ANONYMOUS on open paths)."""
    caller: Caller = connection.scope.get("state", {}).get(_SCOPE_FIELD, ANONYMOUS)
    return caller
