"""The voices directory: `voices.json` (the registry, which an admin may also edit by hand), the clips
it names, and the `uploads/` folder where voices posted through the API keep theirs.

`voices.json` is `{"voices": {"<id>": {"audio": "<path>", "transcript": ..., "cfg_value": ...,
"emotion": ...}}}`
(a list of entries each with a `name` is read too); relative paths are inside the directory.
Every write is atomic (a temporary file renamed over the old one) and made under the directory's
lock file, so servers sharing one directory never interleave their changes.

A directory without `voices.json` is a fresh one while it holds no voice clip; `voices.json` missing
beside clips (in `uploads/` or the directory itself) was lost: that is reported, the clips are kept,
and changes are refused until it is restored or the clips are removed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import filelock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from polyvox.backends.base import VOICE_NAME
from polyvox.runtime.user_dirs import data_home
from polyvox.settings.guidance import (
    CFG_VALUE_MAX,
    CFG_VALUE_MIN,
    INFERENCE_TIMESTEPS_MAX,
    INFERENCE_TIMESTEPS_MIN,
)
from polyvox.text.emotion import Emotion
from polyvox.voices.errors import InvalidVoiceName, VoiceError, VoiceNotFound, VoiceStorageUnavailable

log = logging.getLogger(__name__)

REGISTRY_FILE = "voices.json"
UPLOADS = "uploads"
LOCK_FILE = ".lock"
LOCK_TIMEOUT_S = 30.0
NAME_PATTERN = VOICE_NAME  # one rule for the names of voices and of LoRA adapters (each is a voice)
AUDIO_SUFFIXES = frozenset({".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a", ".aac", ".webm"})
# What `atomic_write` leaves behind if the process dies between writing and renaming.
TEMPORARY_FILE = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")


class VoiceEntry(BaseModel):
    """One registered voice: its clip, the clip's transcript, and settings used when it speaks.

    `label` is the name shown for a voice whose id was assigned (OpenAI's free-form names); `prompt`
    is the description a designed voice was made from; `consent_id` the consent recording it cites."""

    model_config = ConfigDict(extra="ignore")

    audio: str
    transcript: str | None = None
    cfg_value: float | None = Field(None, ge=CFG_VALUE_MIN, le=CFG_VALUE_MAX)
    inference_timesteps: int | None = Field(None, ge=INFERENCE_TIMESTEPS_MIN, le=INFERENCE_TIMESTEPS_MAX)
    emotion: Emotion | None = None  # how it speaks when a request names no `emotion`
    consent: bool | None = None
    consent_id: str | None = None
    label: str | None = None
    prompt: str | None = None
    source: Literal["registered", "uploaded", "designed"] = "registered"
    created: float | None = None
    owner: str | None = None  # the id of the API key that made it; None: every key's, changed by admin keys
    shared: bool = False  # other keys may list and speak it too; only its owner and admin keys change it


def check_name(name: str) -> str:
    """A voice name is 1-64 letters, digits, `_`, `-` or `.`, starting with a letter or digit."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidVoiceName(
            f"invalid voice name {name!r}: use 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit",
            param="name",
        )
    return name


def check_text(value: Any, param: str, max_chars: int = 256, multiline: bool = False) -> str:
    """A free-form field (a label, a description): a non-blank string of at most `max_chars`
    characters of text (no control characters but, if `multiline`, tabs and newlines; no lone
    surrogates), returned stripped."""
    if not isinstance(value, str) or not value.strip():
        raise VoiceError(f"{param}: a non-blank string is required", param=param, code="invalid_value")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise VoiceError(
            f"{param}: not text (a lone UTF-16 surrogate)", param=param, code="invalid_value"
        ) from None
    allowed = "\t\n\r" if multiline else ""
    if len(value) > max_chars or any((ord(c) < 32 or ord(c) == 127) and c not in allowed for c in value):
        raise VoiceError(
            f"{param}: at most {max_chars} characters, without control characters",
            param=param,
            code="invalid_value",
        )
    return value.strip()


def default_voices_dir() -> Path:
    return data_home("voices_dir (POLYVOX_VOICES_DIR)") / "polyvox" / "voices"


class VoiceStore:
    """The directory `root`; `read()` parses the registry, `put`/`relabel`/`remove` change it atomically.
    OSError when the directory cannot be made, written or listed."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.registry_path = self.root / REGISTRY_FILE
        self.root.mkdir(parents=True, exist_ok=True)
        probe = self.root / f".probe.{uuid.uuid4().hex}.tmp"
        probe.write_bytes(b"")
        probe.unlink()
        os.listdir(self.root)  # and readable: sweeping and the lost-registry check list it
        self._lock = filelock.FileLock(self.root / LOCK_FILE, timeout=LOCK_TIMEOUT_S)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock (reentrant; across threads and processes)."""
        try:
            with self._lock:
                yield
        except filelock.Timeout as exc:
            raise VoiceStorageUnavailable(
                f"{self.root} stayed locked for {LOCK_TIMEOUT_S:g} s by another writer"
            ) from exc

    def read(self) -> tuple[dict[str, VoiceEntry], list[str]]:
        """The registry's entries and a message for each problem (a skipped entry, a lost registry).

        A file that is not valid JSON raises VoiceStorageUnavailable."""
        try:
            raw = json.loads(self.registry_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            lost = self.lost_registry()
            return {}, [lost] if lost else []
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
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

    def lost_registry(self) -> str | None:
        """A message when `voices.json` is missing although voice clips remain, else None."""
        if self.registry_path.exists():
            return None
        clips = self._clips_in(self.root / UPLOADS) + self._clips_in(self.root)
        if not clips:
            return None
        shown = ", ".join(str(p.relative_to(self.root)) for p in clips[:5])
        return (
            f"{self.registry_path} is missing but {len(clips)} voice clip(s) remain ({shown}"
            f"{', ...' if len(clips) > 5 else ''}): their voices are not served. Restore voices.json "
            "(from a backup), or delete the clips to start afresh; voices cannot be changed until then"
        )

    def clip_path(self, entry: VoiceEntry) -> Path:
        path = Path(entry.audio).expanduser()
        return path if path.is_absolute() else self.root / path

    def entries_citing(self, consent_id: str) -> list[str]:
        """The ids of the voices whose entry cites the consent recording `consent_id`."""
        entries = self._raw_entries()
        return sorted(
            name for name, e in entries.items() if isinstance(e, dict) and e.get("consent_id") == consent_id
        )

    def put(self, name: str, data: bytes, suffix: str, entry: VoiceEntry) -> VoiceEntry | None:
        """Store the clip under `uploads/` and register it as `name`; returns the entry it replaced.

        Nothing is written when the registry cannot be read; a replaced voice's uploaded clip is
        deleted after the registry no longer names it."""
        suffix = suffix.lower() if suffix.lower() in AUDIO_SUFFIXES else ".audio"
        relative = Path(UPLOADS) / f"{name}.{uuid.uuid4().hex[:12]}{suffix}"
        with self.locked():
            entries = self._raw_entries()
            (self.root / UPLOADS).mkdir(exist_ok=True)
            atomic_write(self.root / relative, data)
            old = entries.get(name)
            entries[name] = entry.model_copy(update={"audio": relative.as_posix()}).model_dump(
                exclude_none=True
            )
            try:
                self._write_registry(entries)
            except VoiceStorageUnavailable:
                (self.root / relative).unlink(missing_ok=True)
                raise
        previous = VoiceEntry.model_validate(old) if isinstance(old, dict) and "audio" in old else None
        if previous is not None:
            self._discard_clip(previous)
        return previous

    def relabel(self, name: str, label: str | None) -> VoiceEntry:
        """Change the display name of the voice `name` (None: shown by its id); its id, clip and
        other fields stay as they are. Returns the entry as now stored."""
        with self.locked():
            entries = self._raw_entries()
            old = entries.get(name)
            if not isinstance(old, dict):
                raise VoiceNotFound(f"voice {name!r} is not registered", param="voice_id")
            changed = {k: v for k, v in old.items() if k != "label"}
            if label is not None:
                changed["label"] = label
            entries[name] = changed
            self._write_registry(entries)
        return VoiceEntry.model_validate(changed)

    def remove(self, name: str) -> VoiceEntry:
        with self.locked():
            entries = self._raw_entries()
            if name not in entries:
                raise VoiceNotFound(f"voice {name!r} is not registered", param="voice_id")
            old = entries.pop(name)
            self._write_registry(entries)
        previous = VoiceEntry.model_validate(old)
        self._discard_clip(previous)
        return previous

    def sweep(self, *folders: str) -> list[Path]:
        """Delete what interrupted writes left: temporary files (here, in `uploads/` and in `folders`)
        and clips in `uploads/` that `voices.json` does not name (only while it reads cleanly)."""
        removed: list[Path] = []
        with self.locked():
            for folder in (self.root, self.root / UPLOADS, *(self.root / f for f in folders)):
                removed += [p for p in files_in(folder) if TEMPORARY_FILE.fullmatch(p.name)]
            try:
                entries = self._raw_entries() if self.registry_path.exists() else None
            except VoiceStorageUnavailable:
                entries = None
            if entries is not None:
                named = {
                    self.clip_path(VoiceEntry(audio=e["audio"])).resolve()
                    for e in entries.values()
                    if isinstance(e, dict) and isinstance(e.get("audio"), str)
                }
                removed += [
                    p
                    for p in files_in(self.root / UPLOADS)
                    if p.resolve() not in named and not TEMPORARY_FILE.fullmatch(p.name)
                ]
            for path in removed:
                with contextlib.suppress(OSError):
                    path.unlink()
        return removed

    def _raw_entries(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.registry_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            lost = self.lost_registry()
            if lost:
                raise VoiceStorageUnavailable(lost) from None
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
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
        """Delete a clip the API stored (never one an admin placed elsewhere)."""
        if entry.source == "registered":
            return
        path = self.clip_path(entry)
        if path.parent.resolve() == (self.root / UPLOADS).resolve():
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not delete old voice clip %s: %s", path, exc)

    @staticmethod
    def _clips_in(folder: Path) -> list[Path]:
        return sorted(p for p in files_in(folder) if p.suffix.lower() in AUDIO_SUFFIXES | {".audio"})


def files_in(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_file()]
    except OSError:
        return []


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
