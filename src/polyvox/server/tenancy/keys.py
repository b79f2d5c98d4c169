"""A named API key as it is stored: its name, scopes, limits and times, and the SHA-256 of its secret
(the secret itself is shown once, when the key is made, and never kept); and `KeySnapshot`, what a key
store reads at once: its keys and its change counter (`key_store.py`)."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

Scope = Literal["speech", "voices", "admin"]
SCOPES: tuple[Scope, ...] = ("speech", "voices", "admin")
DEFAULT_SCOPES: tuple[Scope, ...] = ("speech", "voices")
# A key's name labels its usage rows and metrics: one plain word, never a settings key's label.
KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SECRET_PREFIX = "pv-"


def digest(secret: str) -> str:
    """What a key is stored and looked up by: the hex SHA-256 of its secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


class InvalidKeyRequest(Exception):
    """A named key cannot be made as asked; `param` names the field at fault."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


@dataclass(frozen=True)
class KeyLimits:
    """Per-key limits; None: unlimited."""

    requests_per_minute: int | None = None
    characters_per_minute: int | None = None
    max_streams: int | None = None

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> KeyLimits:
        raw = raw or {}
        return cls(
            *(raw.get(name) for name in ("requests_per_minute", "characters_per_minute", "max_streams"))
        )

    @property
    def any(self) -> bool:
        return any(value is not None for value in asdict(self).values())


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    digest: str
    scopes: tuple[Scope, ...]
    limits: KeyLimits = field(default_factory=KeyLimits)
    created_at: int = 0
    last_used_at: int | None = None

    @property
    def admin(self) -> bool:
        return "admin" in self.scopes

    def allows(self, scope: Scope) -> bool:
        return self.admin or scope in self.scopes

    def used_at(self, when: int) -> ApiKey:
        return replace(self, last_used_at=when)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "digest": self.digest,
            "scopes": list(self.scopes),
            "limits": asdict(self.limits),
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ApiKey:
        return cls(
            id=raw["id"],
            name=raw["name"],
            digest=raw["digest"],
            scopes=tuple(raw["scopes"]),
            limits=KeyLimits.of(raw.get("limits")),
            created_at=int(raw.get("created_at") or 0),
            last_used_at=raw.get("last_used_at"),
        )


def new_key(name: str, scopes: tuple[str, ...] | None, limits: KeyLimits) -> tuple[str, ApiKey]:
    """A fresh secret and the key stored for it; InvalidKeyRequest for a bad name, scope or limit."""
    if not isinstance(name, str) or not KEY_NAME.fullmatch(name):
        raise InvalidKeyRequest(
            "name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", "name"
        )
    chosen = DEFAULT_SCOPES if scopes is None else tuple(dict.fromkeys(scopes))
    unknown = [scope for scope in chosen if scope not in SCOPES]
    if unknown or not chosen:
        raise InvalidKeyRequest(f"scopes: one or more of {', '.join(SCOPES)}", "scopes")
    for limit, value in asdict(limits).items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidKeyRequest(
                f"limits.{limit}: a whole number of at least 1, or null", f"limits.{limit}"
            )
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey(
        id="key_" + secrets.token_hex(8),
        name=name,
        digest=digest(secret),
        scopes=chosen,  # type: ignore[arg-type]  # checked against SCOPES above
        limits=limits,
        created_at=int(time.time()),
    )
    return secret, key


class KeyNameTaken(InvalidKeyRequest):
    def __init__(self, name: str):
        super().__init__(
            f"a key named {name!r} exists already: names label usage, so each is unique",
            "name",
            "key_name_taken",
        )


@dataclass(frozen=True)
class KeySnapshot:
    keys: list[ApiKey]
    counter: int | None  # None: the store holds no key table (never made, or lost)
