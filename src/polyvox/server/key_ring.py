"""`KeyRing`: the keys of the settings (`api_key`, `api_keys`, `api_keys_file`, `admin_api_keys`) as
SHA-256 digests, compared in constant time. A module of its own, below `app_state` and `auth`, so the
app's state can name it without importing the middleware that reads the state."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from polyvox.settings import Settings


def key_digest(key: str) -> bytes:
    """A key as it is kept and compared: its SHA-256."""
    return hashlib.sha256(key.encode()).digest()


def read_key_file(path: Path) -> list[str]:
    """Keys from a file: one per line, blank lines and `#` comments ignored."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


@dataclass(frozen=True)
class KeyRing:
    """SHA-256 digests of the accepted keys (compared in constant time, never kept in the clear)."""

    keys: tuple[bytes, ...]
    admin_keys: tuple[bytes, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        keys = list(settings.api_keys)
        if settings.api_key:
            keys.append(settings.api_key)
        if settings.api_keys_file is not None:
            keys += read_key_file(settings.api_keys_file)
        admin = [key for key in settings.admin_api_keys if key]
        return cls(tuple(key_digest(k) for k in keys if k), tuple(key_digest(k) for k in admin))

    @property
    def open(self) -> bool:
        return not self.keys and not self.admin_keys

    def is_admin(self, digest: bytes) -> bool:
        return _member(digest, self.admin_keys)

    def is_valid(self, digest: bytes) -> bool:
        return _member(digest, self.keys) or self.is_admin(digest)


def _member(digest: bytes, digests: tuple[bytes, ...]) -> bool:
    found = False
    for candidate in digests:
        found |= hmac.compare_digest(digest, candidate)
    return found
