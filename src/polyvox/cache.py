"""The content-addressed audio cache: the engine-rate float32 PCM of finished syntheses on disk, keyed
by everything that shapes the audio, with atomic writes, a TTL and a size cap with LRU eviction.

What is stored is what the engine produced, before speed change, resampling and encoding, so one
entry serves every `response_format`, `sample_rate` and server-side speed, streamed or not; with the
audio, the word timings of an answer that asked for them (its pieces on the engine's clock), so a hit
answers the same words. A cache
that cannot write (read-only or full disk) stops storing and says so in the log; it never fails a
request. Several processes may share one directory: writes are atomic renames, and an entry another
process evicted is simply a miss.

Why not `diskcache`, which does most of this: its index is an SQLite database in the directory, and
the directory here is shared by every server that mounts it (`cache_dir` on a volume several replicas
or API processes write), where SQLite's locking is only as good as the file system's (its docs warn
against network file systems, and the WAL journal diskcache uses needs memory shared on one host).
Here each entry is one file whose header carries its format: what is shared is the file system's own
atomic rename, any process's index is rebuilt from a directory listing, and an upgrade migrates entry
by entry (`CACHE_DIR_FORMAT`). Replicas on separate machines share the cache through Redis instead
(`state/audio_cache.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import struct
import threading
import time
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from polyvox.alignment.timeline import PieceTiming, pieces_from_bytes, pieces_to_bytes
from polyvox.backends.base import Backend, SynthesisRequest
from polyvox.files.dir_format import DirectoryFormat, DirectoryFormatError
from polyvox.runtime.startup import StartupError
from polyvox.runtime.user_dirs import cache_home
from polyvox.settings import Settings
from polyvox.settings.uttera import UTTERA_CACHE_TTL, uttera_turns_cache_off

if TYPE_CHECKING:
    from polyvox.text.lexicon import Lexicon

log = logging.getLogger(__name__)

# 2: word timings after the samples (1 had none; its entries are removed as the directory is upgraded)
CACHE_FORMAT = 2
_MAGIC = b"PVXAUDIO"
# magic, format, sample rate, sample count, created (unix time), bytes of word timings after the samples
_HEADER = struct.Struct("<8sIIQdI")
_SUFFIX = ".pcm"
_WARN_EVERY_S = 60.0
_STALE_TMP_S = 3600.0


@dataclass(frozen=True)
class CachedAudio:
    """A finished answer's engine audio and, if it was timed, its pieces (`PieceTiming`, engine clock)."""

    samples: np.ndarray
    sample_rate: int
    pieces: tuple[PieceTiming, ...] | None = None


def normalize_text(text: str) -> str:
    """The text as the cache sees it: NFC, line endings unified, runs of spaces and tabs collapsed, trimmed.

    Line breaks are kept: a text front end may pause on them."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(lines).strip()


def backend_fingerprint(backend: Backend, lexicon: Lexicon | None = None) -> str:
    """Everything about the engine that changes its audio: name, model id, rate, `info.extra` (model
    revision, voice hash...), and the digest of `lexicon`, the text step's in front of it."""
    info = backend.info
    parts: dict[str, object] = {
        "name": info.name,
        "model": info.model_id,
        "rate": info.sample_rate,
        "extra": dict(sorted(info.extra.items())),
        "capabilities": dataclasses.asdict(info.capabilities),
    }
    if lexicon is not None:
        parts["lexicon"] = lexicon.digest
    return json.dumps(parts, sort_keys=True, default=str)


# A request's fields that do not shape its audio (or are keyed their own way: text, reference).
_NOT_KEYED = ("request_id", "piece", "pieces", "listener", "timeline", "spans", "reference", "text")


def cache_key(
    backend_print: str, request: SynthesisRequest, voice_fingerprint: str | None = None, **extra: object
) -> str:
    """The hex key of a request: the engine fingerprint, the normalised text, the voice and every other
    field of the request but its id. A voice with a prompt is keyed by the prompt's content hash alone,
    never its name (two names for one clip share entries; a re-recorded voice never hits old audio);
    only a voice without a prompt (the embedded engine's styles) is keyed by its name."""
    fields = {
        f.name: getattr(request, f.name)
        for f in dataclasses.fields(request)
        if f.name
        not in ("request_id", "piece", "pieces", "listener", "timeline", "spans", "reference", "text")
    }
    ref = request.reference
    if voice_fingerprint is not None or ref is not None:
        fields.pop("voice", None)
    payload = {
        "format": CACHE_FORMAT,
        "engine": backend_print,
        "text": normalize_text(request.text),
        "voice_fingerprint": voice_fingerprint,
        "reference": None
        if ref is None
        else {"hash": ref.content_hash, "rate": ref.sample_rate, "transcript": ref.transcript},
        "fields": fields,
        "extra": extra,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class AudioStore(Protocol):
    """Where cached audio lives: `AudioCache` on disk, or Redis' (`state/audio_cache.py`, with
    `state_url`). Both are thread-safe; their calls block (on the disk, on Redis)."""

    def get(self, key: str) -> CachedAudio | None: ...

    def put(
        self, key: str, samples: np.ndarray, sample_rate: int, pieces: Sequence[PieceTiming] | None = None
    ) -> bool: ...


def _drop_entries_of_another_format(directory: Path) -> None:
    """Format 1's entries hold no word timings, and their keys (which name the format) are never asked
    for again: removed, rather than left to age out of the size cap. Each entry's header names its own
    format, so one already of the current format (a directory whose `format.json` was lost) is kept."""
    prefix = struct.Struct("<8sI")
    for path in directory.glob(f"*{_SUFFIX}"):
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                head = f.read(prefix.size)
            if len(head) == prefix.size and prefix.unpack(head) == (_MAGIC, CACHE_FORMAT):
                continue
            path.unlink()


# The directory's format is its entries' (each `<key>.pcm` names CACHE_FORMAT in its header; one of
# another format is a miss, and removed).
CACHE_DIR_FORMAT = DirectoryFormat("cache_dir", CACHE_FORMAT, {1: _drop_entries_of_another_format})


class AudioCache:
    """A directory of `<key>.pcm` files with an in-memory LRU index; every method is thread-safe.

    `ttl_s` of 0 or None means entries never expire. `on_change(entries, bytes)` reports the size.
    """

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        ttl_s: float | None = None,
        on_change: Callable[[int, int], None] | None = None,
    ):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s or None
        self._on_change = on_change
        self._lock = threading.Lock()
        self._index: OrderedDict[str, int] = OrderedDict()  # key -> size, least recently used first
        self._bytes = 0
        self._last_warning = 0.0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._probe()
        CACHE_DIR_FORMAT.ensure(self.directory)
        self._scan()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._index)

    def get(self, key: str) -> CachedAudio | None:
        """The entry's audio, or None (absent, expired, damaged or unreadable: all a miss)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                header = f.read(_HEADER.size)
                magic, version, rate, count, created, timed = _HEADER.unpack(header)
                data = f.read()
        except (OSError, struct.error):
            self._forget(key)
            return None
        expired = self.ttl_s is not None and time.time() - created > self.ttl_s
        if magic != _MAGIC or version != CACHE_FORMAT or len(data) != count * 4 + timed or expired:
            self._remove(key)
            return None
        pieces = pieces_from_bytes(data[count * 4 :]) if timed else None
        if timed and pieces is None:
            self._remove(key)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # the file's mtime is its last use, for LRU order across restarts
        with self._lock:
            if key not in self._index:
                self._index[key] = _HEADER.size + len(data)
                self._bytes += _HEADER.size + len(data)
            self._index.move_to_end(key)
        audio = np.frombuffer(data, dtype="<f4", count=count).astype(np.float32)
        return CachedAudio(audio, rate, pieces)

    def put(
        self, key: str, samples: np.ndarray, sample_rate: int, pieces: Sequence[PieceTiming] | None = None
    ) -> bool:
        """Store atomically (write a temporary file, rename it over the key); False if not stored."""
        audio = np.ascontiguousarray(samples, dtype="<f4").tobytes()
        timings = pieces_to_bytes(pieces) if pieces is not None else b""
        data = audio + timings
        size = _HEADER.size + len(data)
        if size > self.max_bytes:
            return False
        header = _HEADER.pack(_MAGIC, CACHE_FORMAT, sample_rate, len(audio) // 4, time.time(), len(timings))
        tmp = self.directory / f".{key}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "xb") as f:
                f.write(header)
                f.write(data)
            os.replace(tmp, self._path(key))
        except OSError as exc:
            self._warn(f"audio cache write failed ({exc.strerror or exc}); continuing without storing")
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return False
        with self._lock:
            self._bytes += size - self._index.pop(key, 0)
            self._index[key] = size
            victims = []
            while self._bytes > self.max_bytes and len(self._index) > 1:
                victim, victim_size = self._index.popitem(last=False)
                self._bytes -= victim_size
                victims.append(victim)
        for victim in victims:
            self._unlink(victim)
        self._changed()
        return True

    def clear(self) -> None:
        with self._lock:
            keys = list(self._index)
            self._index.clear()
            self._bytes = 0
        for key in keys:
            self._unlink(key)
        self._changed()

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{_SUFFIX}"

    def _probe(self) -> None:
        probe = self.directory / f".probe.{uuid.uuid4().hex}.tmp"
        probe.write_bytes(b"")
        probe.unlink()

    def _scan(self) -> None:
        """Index what an earlier run left, least recently used first; drop expired and stale files."""
        now = time.time()
        found = []
        for entry in os.scandir(self.directory):
            try:
                stat = entry.stat()
                if entry.name.endswith(".tmp"):
                    if now - stat.st_mtime > _STALE_TMP_S:
                        os.unlink(entry.path)
                    continue
                if not entry.name.endswith(_SUFFIX):
                    continue
                if self.ttl_s is not None and now - stat.st_mtime > self.ttl_s:
                    os.unlink(entry.path)
                    continue
            except OSError:
                continue
            found.append((stat.st_mtime, entry.name[: -len(_SUFFIX)], stat.st_size))
        for _, key, size in sorted(found):
            self._index[key] = size
            self._bytes += size
        self._changed()

    def _forget(self, key: str) -> None:
        with self._lock:
            self._bytes -= self._index.pop(key, 0)
        self._changed()

    def _remove(self, key: str) -> None:
        self._forget(key)
        self._unlink(key)

    def _unlink(self, key: str) -> None:
        with contextlib.suppress(OSError):
            self._path(key).unlink(missing_ok=True)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(len(self._index), self._bytes)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning > _WARN_EVERY_S:
            self._last_warning = now
            log.warning("%s (%s)", message, self.directory)


def default_cache_dir() -> Path:
    return cache_home("cache_dir (POLYVOX_CACHE_DIR)") / "polyvox" / "audio"


def open_cache(
    directory: Path | None,
    max_bytes: int,
    ttl_minutes: float,
    on_change: Callable[[int, int], None] | None = None,
) -> AudioCache | None:
    """The cache in `directory` (default: ~/.cache/polyvox/audio), or None with a warning when the
    directory cannot be created or written: the server then runs without a cache. StartupError when a
    newer polyvox wrote the directory."""
    path = directory or default_cache_dir()
    try:
        return AudioCache(path, max_bytes, ttl_minutes * 60.0, on_change)
    except DirectoryFormatError as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        log.warning("audio cache disabled: %s is not writable (%s)", path, exc.strerror or exc)
        return None


def describe_cache(settings: Settings) -> str:
    """One line for the start-up log: where the cache is and how long entries live, or why it is off."""
    if not settings.cache_enabled:
        if uttera_turns_cache_off():
            return (
                f"audio cache off: {UTTERA_CACHE_TTL}={os.environ[UTTERA_CACHE_TTL]} turns it off, as in "
                "uttera-tts-vllm (polyvox's own POLYVOX_CACHE_TTL_MINUTES=0 would keep entries forever)"
            )
        return "audio cache off (cache_enabled is false)"
    ttl = settings.cache_ttl_minutes
    expiry = f"entries expire after {ttl:g} min" if ttl else "entries never expire"
    where = settings.cache_dir or default_cache_dir()
    return f"audio cache in {where}: {expiry}, at most {settings.cache_max_bytes} bytes"
