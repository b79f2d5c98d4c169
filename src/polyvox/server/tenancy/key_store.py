"""Where named keys live: `keys.json` in the voices directory (written atomically, under the
directory's lock, so API processes and servers sharing the directory agree), or Redis when `state_url`
is set (`redis_keys.py`). `open_key_store` picks the one the settings name; the server and
`polyvox keys` use the same.

Every store keeps a change counter beside its keys, moved by each key made or revoked and never back:
a store whose counter is missing (`KeySnapshot.counter` None) holds no key table at all (never made,
or lost: Redis restarted empty, the file deleted), and one whose counter went back lost its data and
was written again since. A store with a counter and no key had its last key revoked."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Protocol

import filelock

from polyvox.files.file_stamp import file_stamp
from polyvox.server.tenancy.keys import ApiKey, KeyNameTaken, KeySnapshot
from polyvox.settings import Settings
from polyvox.voices.store import default_voices_dir

KEYS_FILE = "keys.json"
LOCK_TIMEOUT_S = 10.0


class KeyStore(Protocol):
    """Blocking calls (the server makes them from a thread)."""

    where: str  # shown in logs and errors (a URL without its password, a path)

    def all(self) -> list[ApiKey]: ...

    def read(self) -> KeySnapshot:
        """The keys and the change counter, read together."""

    def add(self, key: ApiKey) -> None:
        """Store `key`; KeyNameTaken when its name is in use."""

    def remove(self, key_id: str) -> bool:
        """Remove the key with id `key_id`; whether there was one."""

    def restore(self, keys: list[ApiKey], above: int) -> None:
        """After a loss: store those of `keys` the store lacks (by digest) and set the counter past
        `above` (the last one seen before the loss)."""

    def touch(self, used: dict[str, int]) -> None:
        """Record last-used times (key id → Unix time), keeping the later of each."""

    def version(self) -> object:
        """Something that changes whenever the keys do (cheap: one stat, one Redis GET)."""


class FileKeyStore:
    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / KEYS_FILE
        self.where = str(self.path)
        self._lock = filelock.FileLock(root / (KEYS_FILE + ".lock"), timeout=LOCK_TIMEOUT_S)

    def all(self) -> list[ApiKey]:
        return self.read().keys

    def read(self) -> KeySnapshot:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return KeySnapshot([], None)
        keys = [ApiKey.from_json(item) for item in raw.get("keys", [])]
        return KeySnapshot(keys, int(raw.get("counter", 0)))

    def add(self, key: ApiKey) -> None:
        with self._lock:
            now = self.read()
            if any(other.name == key.name for other in now.keys):
                raise KeyNameTaken(key.name)
            self._write([*now.keys, key], (now.counter or 0) + 1)

    def remove(self, key_id: str) -> bool:
        with self._lock:
            now = self.read()
            kept = [key for key in now.keys if key.id != key_id]
            if len(kept) == len(now.keys):
                return False
            self._write(kept, (now.counter or 0) + 1)
            return True

    def restore(self, keys: list[ApiKey], above: int) -> None:
        with self._lock:
            now = self.read()
            held = {key.digest for key in now.keys}
            self._write(
                [*now.keys, *(key for key in keys if key.digest not in held)],
                max(now.counter or 0, above) + 1,
            )

    def touch(self, used: dict[str, int]) -> None:
        with self._lock:
            now = self.read()
            if now.counter is not None:  # never makes a key table that is not there
                self._write([_later(key, used.get(key.id)) for key in now.keys], now.counter)

    def version(self) -> object:
        return file_stamp(self.path)

    def _write(self, keys: list[ApiKey], counter: int) -> None:
        text = json.dumps({"counter": counter, "keys": [key.to_json() for key in keys]}, indent=2)
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
    """Whether the store holds a key table (keys, or a table whose last key was revoked), or cannot be
    read now: a server starting with one requires keys, whatever its settings' keys."""
    try:
        return open_key_store(settings).read().counter is not None
    except Exception:  # Redis away, an unreadable file: closed until it can be read
        return True
