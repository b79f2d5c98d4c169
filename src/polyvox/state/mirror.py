"""The voices directory mirrored through Redis, so a voice made on one replica speaks on every one.

What is mirrored: the index files (`voices.json`, `consents.json`), merged key by key (a voice, a
consent), and the files they name or the freezer writes (`uploads/`, `consents/`, `builtin/`, clips
at the top of the directory), each by its content hash. Redis holds a hash per index, a hash
`files` (path -> sha256), the file contents by hash (`blob:<sha256>`) and a `version` counter
bumped by every change. `sync()` pushes what this replica changed since it last agreed with Redis,
then makes the directory equal to Redis (files first, then indexes, then deletions, so the
directory is never inconsistent to a reader), all under the directory's own lock.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from polyvox.state.connection import StateConnection
from polyvox.state.keyed import local_changes
from polyvox.voices.builtin import BUILTIN_DIR
from polyvox.voices.consents import INDEX_FILE as CONSENTS_FILE
from polyvox.voices.consents import RECORDINGS
from polyvox.voices.store import AUDIO_SUFFIXES, REGISTRY_FILE, UPLOADS, VoiceStore, atomic_write, files_in

log = logging.getLogger(__name__)

PREFIX = "polyvox:voices:"
# index file -> the top-level key holding its {key: entry} map
INDEXES = {REGISTRY_FILE: "voices", CONSENTS_FILE: "consents"}
FOLDERS = (UPLOADS, RECORDINGS, BUILTIN_DIR)


@dataclass
class Snapshot:
    """One side's state: each index as {key: canonical JSON}, and every mirrored file's hash."""

    indexes: dict[str, dict[str, str]] = field(default_factory=lambda: {name: {} for name in INDEXES})
    files: dict[str, str] = field(default_factory=dict)


class DirectoryMirror:
    """Keeps `store.root` and the Redis copy under `prefix` in step (see the module docstring)."""

    def __init__(self, store: VoiceStore, connection: StateConnection, prefix: str = PREFIX):
        self.store = store
        self.root = store.root
        self.connection = connection
        self.prefix = prefix
        self.base: Snapshot | None = None  # the state last agreed with Redis; None: never
        self.version: int | None = None
        self._hashes: dict[str, tuple[int, int, str]] = {}  # path -> (size, mtime_ns, sha256)

    def forget_base(self) -> None:
        """Treat everything held here as new: the next sync publishes it (Redis was emptied)."""
        self.base = Snapshot()

    @property
    def version_key(self) -> str:
        """The counter in Redis that every change to the directory's copy there bumps."""
        return self._key("version")

    def sync(self) -> bool:
        """Push local changes, pull Redis' state; True when the directory changed. Raises
        StateUnavailable (the directory is then untouched or consistently half-updated)."""
        with self.store.locked():
            local = self.local()
            version = self.connection.call("voices_version", lambda r: int(r.get(self._key("version")) or 0))
            if self.base is not None and local == self.base and version == self.version:
                return False
            if self.base is not None:
                self._push(local, self.base)
            remote, self.version = self.connection.call("voices_pull", self._pull)
            changed = self._apply(local, remote)
            self.base = remote
        return changed

    # ------------------------------------------------------------------ this replica's directory

    def local(self) -> Snapshot:
        snapshot = Snapshot()
        for name, top in INDEXES.items():
            snapshot.indexes[name] = self._read_index(name, top)
        paths = [p for folder in FOLDERS for p in files_in(self.root / folder)]
        paths += [p for p in files_in(self.root) if p.suffix.lower() in AUDIO_SUFFIXES]
        for path in paths:
            if path.name.startswith("."):
                continue  # temporary files, locks
            relative = path.relative_to(self.root).as_posix()
            try:
                snapshot.files[relative] = self._hash(path, relative)
            except OSError:
                continue
        return snapshot

    def _read_index(self, name: str, top: str) -> dict[str, str]:
        try:
            raw = json.loads((self.root / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("shared state: %s not mirrored, it cannot be read (%s)", self.root / name, exc)
            return {}
        items = raw.get(top, {}) if isinstance(raw, dict) else {}
        if isinstance(items, list):  # voices.json's list form: entries carrying their name
            items = {item.get("name"): item for item in items if isinstance(item, dict)}
        if not isinstance(items, dict):
            return {}
        return {str(key): _canonical(value) for key, value in items.items() if key}

    def _hash(self, path: Path, relative: str) -> str:
        stat = path.stat()
        known = self._hashes.get(relative)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime_ns):
            return known[2]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        self._hashes[relative] = (stat.st_size, stat.st_mtime_ns, digest)
        return digest

    # ------------------------------------------------------------------ Redis

    def _key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _push(self, local: Snapshot, base: Snapshot) -> None:
        file_changes = local_changes(local.files, base.files)
        index_changes = {name: local_changes(local.indexes[name], base.indexes[name]) for name in INDEXES}
        if not file_changes and not any(index_changes.values()):
            return

        def push(client) -> None:
            missing = [
                sha for sha in set(file_changes.set.values()) if not client.exists(self._key(f"blob:{sha}"))
            ]
            pipe = client.pipeline(transaction=True)
            for relative, sha in file_changes.set.items():
                if sha in missing:
                    pipe.set(self._key(f"blob:{sha}"), (self.root / relative).read_bytes())
                    missing.remove(sha)
            if file_changes.set:
                pipe.hset(self._key("files"), mapping=file_changes.set)
            if file_changes.deleted:
                pipe.hdel(self._key("files"), *file_changes.deleted)
            for name, changes in index_changes.items():
                if changes.set:
                    pipe.hset(self._key(f"index:{name}"), mapping=changes.set)
                if changes.deleted:
                    pipe.hdel(self._key(f"index:{name}"), *changes.deleted)
            pipe.incr(self._key("version"))
            pipe.execute()
            # content no path names any more
            named = set(client.hvals(self._key("files")))
            stale = {old for relative in file_changes.deleted if (old := base.files.get(relative))}
            orphans = [self._key(f"blob:{old}") for old in stale if old.encode() not in named]
            if orphans:
                client.delete(*orphans)

        self.connection.call("voices_push", push)
        log.info(
            "shared state: published %d voice file(s) and %d index change(s)",
            len(file_changes.set) + len(file_changes.deleted),
            sum(len(c.set) + len(c.deleted) for c in index_changes.values()),
        )

    def _pull(self, client) -> tuple[Snapshot, int]:
        pipe = client.pipeline(transaction=True)
        pipe.get(self._key("version"))
        pipe.hgetall(self._key("files"))
        for name in INDEXES:
            pipe.hgetall(self._key(f"index:{name}"))
        version, files, *indexes = pipe.execute()
        snapshot = Snapshot(
            indexes={
                name: {k.decode(): v.decode() for k, v in index.items()}
                for name, index in zip(INDEXES, indexes, strict=True)
            },
            files={k.decode(): v.decode() for k, v in files.items()},
        )
        return snapshot, int(version or 0)

    def _apply(self, local: Snapshot, remote: Snapshot) -> bool:
        """Make the directory hold `remote`: fetch and write changed files, then the indexes, then
        delete the files Redis no longer has."""
        changed = False
        for relative, sha in remote.files.items():
            if local.files.get(relative) == sha:
                continue
            data = self.connection.call("voices_pull", functools.partial(_get, key=self._key(f"blob:{sha}")))
            if data is None or hashlib.sha256(data).hexdigest() != sha:
                log.warning(
                    "shared state: the content of %s is missing from Redis; kept as it is here", relative
                )
                continue
            path = self.root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data)
            changed = True
        for name, top in INDEXES.items():
            if remote.indexes[name] == local.indexes[name]:
                continue
            if not remote.indexes[name] and not (self.root / name).exists():
                continue
            entries = {key: json.loads(value) for key, value in sorted(remote.indexes[name].items())}
            payload = {top: entries, "updated": time.time()}
            atomic_write(self.root / name, json.dumps(payload, indent=2, ensure_ascii=False).encode())
            changed = True
        for relative in local.files.keys() - remote.files.keys():
            (self.root / relative).unlink(missing_ok=True)
            self._hashes.pop(relative, None)
            changed = True
        return changed


def _get(client: redis.Redis, key: str) -> bytes | None:
    return client.get(key)  # type: ignore[return-value]  # a client without decode_responses


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
