"""Voice consent recordings (OpenAI's `voice_consents`): the speaker reading a consent phrase, kept
beside the voices as `consents/<id><suffix>`, indexed by `consents.json` in the voices directory
(`{"consents": {"<id>": {"name", "language", "created", "recording"}}}`).

A voice created from an audio sample cites one by id. Writes are atomic and made under the voices
directory's lock; nothing is written for a refused request.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from polyvox.voices.errors import ConsentNotFound, VoiceError, VoiceStorageUnavailable
from polyvox.voices.store import AUDIO_SUFFIXES, TEMPORARY_FILE, VoiceStore, atomic_write, files_in

INDEX_FILE = "consents.json"
RECORDINGS = "consents"
# A BCP 47 tag's shape (language, then subtags): "en", "en-US", "zh-Hant-TW", "es-419".
LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")


class ConsentRecord(BaseModel):
    id: str
    name: str
    language: str
    created: float  # Unix time; OpenAI's `created_at` is its whole seconds
    recording: str
    owner: str | None = None  # the id of the API key that made it; None: every key's, changed by admin keys
    shared: bool = False  # other keys may see and cite it too; only its owner and admin keys change it

    @property
    def created_at(self) -> int:
        return int(self.created)


def check_language(value: Any) -> str:
    if not isinstance(value, str) or not LANGUAGE_TAG.fullmatch(value.strip()):
        raise VoiceError(
            f"language: {value!r} is not a BCP 47 language tag (for example en-US)",
            param="language",
            code="invalid_language",
        )
    return value.strip()


class ConsentStore:
    """The consent recordings of the voices directory `store.root`."""

    def __init__(self, store: VoiceStore):
        self.store = store
        self.index_path = store.root / INDEX_FILE
        self.folder = store.root / RECORDINGS

    def all(self) -> list[ConsentRecord]:
        """Every consent, newest first (ties by id: a total order, so cursors are stable)."""
        records = [ConsentRecord.model_validate(r) for r in self._index().values()]
        return sorted(records, key=lambda r: (-r.created, r.id))

    def get(self, consent_id: str) -> ConsentRecord:
        record = self._index().get(consent_id)
        if record is None:
            raise ConsentNotFound(f"consent recording {consent_id!r} not found", param="consent_id")
        return ConsentRecord.model_validate(record)

    def page(
        self, after: str | None, limit: int, visible: Callable[[ConsentRecord], bool] = lambda record: True
    ) -> tuple[list[ConsentRecord], bool]:
        """Up to `limit` consents following the one with id `after` (from the start: None), and
        whether more follow; only those `visible` accepts."""
        records = [record for record in self.all() if visible(record)]
        start = 0
        if after is not None:
            ids = [r.id for r in records]
            if after not in ids:
                raise VoiceError(
                    f"after: no consent recording {after!r}", param="after", code="invalid_cursor"
                )
            start = ids.index(after) + 1
        return records[start : start + limit], start + limit < len(records)

    def create(
        self,
        name: str,
        language: str,
        data: bytes,
        suffix: str,
        owner: str | None = None,
        shared: bool = False,
    ) -> ConsentRecord:
        """Store a checked recording under a new id (`owner`: the API key that made it; `shared`:
        other keys may use it too)."""
        consent_id = f"cons_{secrets.token_hex(12)}"
        suffix = suffix.lower() if suffix.lower() in AUDIO_SUFFIXES else ".audio"
        record = ConsentRecord(
            id=consent_id,
            name=name,
            language=language,
            created=time.time(),
            recording=f"{RECORDINGS}/{consent_id}{suffix}",
            owner=owner,
            shared=shared,
        )
        with self.store.locked():
            index = self._index()
            self.folder.mkdir(exist_ok=True)
            atomic_write(self.store.root / record.recording, data)
            index[consent_id] = record.model_dump()
            try:
                self._write(index)
            except VoiceStorageUnavailable:
                (self.store.root / record.recording).unlink(missing_ok=True)
                raise
        return record

    def rename(self, consent_id: str, name: str) -> ConsentRecord:
        with self.store.locked():
            index = self._index()
            if consent_id not in index:
                raise ConsentNotFound(f"consent recording {consent_id!r} not found", param="consent_id")
            index[consent_id] = {**index[consent_id], "name": name}
            self._write(index)
        return ConsentRecord.model_validate(index[consent_id])

    def delete(self, consent_id: str) -> None:
        """Delete the consent and its recording (callers check no voice cites it, under the lock)."""
        with self.store.locked():
            index = self._index()
            record = index.pop(consent_id, None)
            if record is None:
                raise ConsentNotFound(f"consent recording {consent_id!r} not found", param="consent_id")
            self._write(index)
        (self.store.root / ConsentRecord.model_validate(record).recording).unlink(missing_ok=True)

    def lost_index(self) -> str | None:
        """A message when `consents.json` is missing although recordings remain, else None."""
        recordings = [p for p in files_in(self.folder) if not TEMPORARY_FILE.fullmatch(p.name)]
        if self.index_path.exists() or not recordings:
            return None
        return (
            f"{self.index_path} is missing but {len(recordings)} consent recording(s) remain in "
            f"{self.folder}: restore consents.json (from a backup), or delete the recordings to start "
            "afresh; consents cannot be changed until then"
        )

    def sweep(self) -> list[Path]:
        """Delete temporary files in `consents/` and recordings `consents.json` does not name (only
        while it reads cleanly). The directory's own temporary files are the VoiceStore's to sweep."""
        removed: list[Path] = []
        with self.store.locked():
            removed += [p for p in files_in(self.folder) if TEMPORARY_FILE.fullmatch(p.name)]
            try:
                index = self._index() if self.index_path.exists() else None
            except VoiceStorageUnavailable:
                index = None
            if index is not None:
                named = {
                    (self.store.root / r["recording"]).resolve()
                    for r in index.values()
                    if isinstance(r, dict) and isinstance(r.get("recording"), str)
                }
                removed += [
                    p
                    for p in files_in(self.folder)
                    if p.resolve() not in named and not TEMPORARY_FILE.fullmatch(p.name)
                ]
            for path in removed:
                path.unlink(missing_ok=True)
        return removed

    def _index(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            lost = self.lost_index()
            if lost:
                raise VoiceStorageUnavailable(lost) from None
            return {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise VoiceStorageUnavailable(
                f"{self.index_path} cannot be read ({exc}); fix it by hand before changing consents"
            ) from exc
        consents = raw.get("consents") if isinstance(raw, dict) else None
        if not isinstance(consents, dict):
            raise VoiceStorageUnavailable(f"{self.index_path}: expected {{'consents': {{id: record}}}}")
        try:
            return {k: ConsentRecord.model_validate(v).model_dump() for k, v in consents.items()}
        except ValidationError as exc:
            raise VoiceStorageUnavailable(f"{self.index_path}: a record is malformed ({exc})") from exc

    def _write(self, index: dict[str, Any]) -> None:
        payload = {"consents": {k: index[k] for k in sorted(index)}, "updated": time.time()}
        atomic_write(self.index_path, json.dumps(payload, indent=2, ensure_ascii=False).encode())
