"""The voices directory: `voices.json` (the registry, which an admin may also edit by hand), the clips
it names, and the `uploads/` folder where voices posted through the API keep theirs.

`voices.json` is `{"voices": {"<name>": {"audio": "<path>", "transcript": ..., "cfg_value": ...}}}`
(a list of entries each with a `name` is read too); relative paths are inside the directory.
Every write is atomic: a temporary file renamed over the old one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from polyvox.voices.errors import InvalidVoiceName, VoiceNotFound, VoiceStorageUnavailable

log = logging.getLogger(__name__)

REGISTRY_FILE = "voices.json"
UPLOADS = "uploads"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
AUDIO_SUFFIXES = frozenset({".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a", ".aac", ".webm"})


class VoiceEntry(BaseModel):
    """One registered voice: its clip, the clip's transcript, and settings used when it speaks."""

    model_config = ConfigDict(extra="ignore")

    audio: str
    transcript: str | None = None
    cfg_value: float | None = Field(None, ge=0.5, le=5.0)
    inference_timesteps: int | None = Field(None, ge=1, le=100)
    consent: bool | None = None
    source: Literal["registered", "uploaded"] = "registered"
    created: float | None = None


def check_name(name: str) -> str:
    """A voice name is 1-64 letters, digits, `_`, `-` or `.`, starting with a letter or digit."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidVoiceName(
            f"invalid voice name {name!r}: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit",
            param="name",
        )
    return name


def default_voices_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "polyvox" / "voices"


class VoiceStore:
    """The directory `root`; `read()` parses the registry, `put`/`remove` change it atomically."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.registry_path = self.root / REGISTRY_FILE
        self._lock = threading.Lock()
        self.root.mkdir(parents=True, exist_ok=True)
        probe = self.root / f".probe.{uuid.uuid4().hex}.tmp"
        probe.write_bytes(b"")
        probe.unlink()

    def read(self) -> tuple[dict[str, VoiceEntry], list[str]]:
        """The registry's entries and a message for each entry that was skipped.

        A missing file is an empty registry; a file that is not valid JSON raises VoiceStorageUnavailable."""
        try:
            raw = json.loads(self.registry_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}, []
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VoiceStorageUnavailable(f"{self.registry_path} cannot be read: {exc}") from exc
        items = raw.get("voices", {}) if isinstance(raw, dict) else None
        if isinstance(items, list):
            items = {item.get("name"): item for item in items if isinstance(item, dict)}
        if not isinstance(items, dict):
            raise VoiceStorageUnavailable(f"{self.registry_path}: expected {{'voices': {{name: entry}}}}")
        entries: dict[str, VoiceEntry] = {}
        problems: list[str] = []
        for name, item in items.items():
            try:
                entries[check_name(name)] = VoiceEntry.model_validate(item)
            except (InvalidVoiceName, ValidationError) as exc:
                problems.append(f"voice {name!r} skipped: {exc}")
        return entries, problems

    def clip_path(self, entry: VoiceEntry) -> Path:
        path = Path(entry.audio).expanduser()
        return path if path.is_absolute() else self.root / path

    def put(self, name: str, data: bytes, suffix: str, entry: VoiceEntry) -> VoiceEntry | None:
        """Store the clip under `uploads/` and register it as `name`; returns the entry it replaced.

        A replaced voice's uploaded clip is deleted after the registry no longer names it."""
        suffix = suffix.lower() if suffix.lower() in AUDIO_SUFFIXES else ".audio"
        relative = Path(UPLOADS) / f"{name}.{uuid.uuid4().hex[:12]}{suffix}"
        with self._lock:
            (self.root / UPLOADS).mkdir(exist_ok=True)
            atomic_write(self.root / relative, data)
            entries = self._raw_entries()
            old = entries.get(name)
            entries[name] = entry.model_copy(update={"audio": relative.as_posix()}).model_dump(
                exclude_none=True
            )
            self._write_registry(entries)
        previous = VoiceEntry.model_validate(old) if isinstance(old, dict) and "audio" in old else None
        if previous is not None:
            self._discard_clip(previous)
        return previous

    def remove(self, name: str) -> VoiceEntry:
        with self._lock:
            entries = self._raw_entries()
            if name not in entries:
                raise VoiceNotFound(f"voice {name!r} is not registered", param="voice_id")
            old = entries.pop(name)
            self._write_registry(entries)
        previous = VoiceEntry.model_validate(old)
        self._discard_clip(previous)
        return previous

    def _raw_entries(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.registry_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VoiceStorageUnavailable(
                f"{self.registry_path} cannot be read ({exc}); fix it by hand before changing voices"
            ) from exc
        items = raw.get("voices", {}) if isinstance(raw, dict) else {}
        if isinstance(items, list):
            items = {item.get("name"): item for item in items if isinstance(item, dict)}
        return dict(items)

    def _write_registry(self, entries: dict[str, Any]) -> None:
        payload = {"voices": {name: entries[name] for name in sorted(entries)}, "updated": time.time()}
        atomic_write(self.registry_path, json.dumps(payload, indent=2, ensure_ascii=False).encode())

    def _discard_clip(self, entry: VoiceEntry) -> None:
        """Delete a clip the API uploaded (never one an admin placed elsewhere)."""
        if entry.source != "uploaded":
            return
        path = self.clip_path(entry)
        if path.parent.resolve() == (self.root / UPLOADS).resolve():
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not delete old voice clip %s: %s", path, exc)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise VoiceStorageUnavailable(f"cannot write {path}: {exc.strerror or exc}") from exc
