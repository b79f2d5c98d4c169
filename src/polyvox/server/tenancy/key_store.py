"""Where named keys live: `keys.json` in the voices directory (written atomically, under the
directory's lock, so API processes and servers sharing the directory agree), or Redis when `state_url`
is set (`redis_keys.py`). `open_key_store` picks the one the settings name; the server and
`polyvox keys` use the same."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Protocol

import filelock

from polyvox.file_stamp import file_stamp
from polyvox.server.tenancy.keys import ApiKey, KeyNameTaken
from polyvox.settings import Settings
from polyvox.voices.store import default_voices_dir

KEYS_FILE = "keys.json"
LOCK_TIMEOUT_S = 10.0


class KeyStore(Protocol):
    """Blocking calls (the server makes them from a thread)."""

    def all(self) -> list[ApiKey]: ...

    def add(self, key: ApiKey) -> None:
        """Store `key`; KeyNameTaken when its name is in use."""

    def remove(self, key_id: str) -> bool:
        """Remove the key with id `key_id`; whether there was one."""

    def touch(self, used: dict[str, int]) -> None:
        """Record last-used times (key id → Unix time), keeping the later of each."""

    def version(self) -> object:
        """Something that changes whenever the keys do (cheap: one stat, one Redis GET)."""


class FileKeyStore:
    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / KEYS_FILE
        self._lock = filelock.FileLock(root / (KEYS_FILE + ".lock"), timeout=LOCK_TIMEOUT_S)

    def all(self) -> list[ApiKey]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        return [ApiKey.from_json(item) for item in raw.get("keys", [])]

    def add(self, key: ApiKey) -> None:
        with self._lock:
            keys = self.all()
            if any(other.name == key.name for other in keys):
                raise KeyNameTaken(key.name)
            self._write([*keys, key])

    def remove(self, key_id: str) -> bool:
        with self._lock:
            keys = self.all()
            kept = [key for key in keys if key.id != key_id]
            if len(kept) == len(keys):
                return False
            self._write(kept)
            return True

    def touch(self, used: dict[str, int]) -> None:
        with self._lock:
            keys = self.all()
            self._write([_later(key, used.get(key.id)) for key in keys])

    def version(self) -> object:
        return file_stamp(self.path)

    def _write(self, keys: list[ApiKey]) -> None:
        text = json.dumps({"keys": [key.to_json() for key in keys]}, indent=2)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".keys.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)  # a reader sees the old file or the new one, never half
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _later(key: ApiKey, used: int | None) -> ApiKey:
    if used is None or (key.last_used_at is not None and key.last_used_at >= used):
        return key
    return key.used_at(used)


def open_key_store(settings: Settings) -> KeyStore:
    """Redis' when `state_url` is set (every replica shares it), else the voices directory's file."""
    if settings.state_url:
        from polyvox.server.tenancy.redis_keys import RedisKeyStore

        return RedisKeyStore.from_url(settings.state_url)
    return FileKeyStore(settings.voices_dir or default_voices_dir())


def named_keys_exist(settings: Settings) -> bool:
    """Whether any named key is stored (False when the store cannot be read now): a server with one
    is not open, whatever its settings' keys."""
    try:
        return bool(open_key_store(settings).all())
    except Exception:  # Redis away, an unreadable file: the server says so itself when it reads them
        return False
