"""`VoiceRegistry`: every voice the server knows (builtin designs and registered or uploaded clips),
turned into what a synthesis request needs: a `ResolvedVoice` carrying the reference clip and the
clip's content hash, which is what caches key on (never the voice's name)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from polyvox.engines.base import OPENAI_VOICES, Engine, ReferenceAudio
from polyvox.settings import Settings
from polyvox.voices.builtin import BUILTIN_DIR, BuiltinFreezer, BuiltinVoice, load_builtin_voices
from polyvox.voices.clips import ClipLimits, load_clip
from polyvox.voices.errors import (
    InvalidVoiceAudio,
    VoiceConflict,
    VoiceError,
    VoiceNotFound,
    VoiceStorageUnavailable,
    VoiceUnsupported,
)
from polyvox.voices.store import VoiceEntry, VoiceStore, check_name, default_voices_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedVoice:
    """A voice ready to speak: its reference clip (None: the engine's own voice of that name) and
    the settings it brings."""

    name: str
    source: str  # builtin, registered or uploaded
    reference: ReferenceAudio | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None

    @property
    def voice_prompt_hash(self) -> str | None:
        """The content hash of the voice's prompt clip: what a cache key holds for this voice."""
        return self.reference.content_hash if self.reference is not None else None


@dataclass(frozen=True)
class VoiceInfo:
    """What the voice API shows about one voice."""

    id: str
    source: str
    description: str | None = None
    transcript: str | None = None
    duration_s: float | None = None
    voice_prompt_hash: str | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    consent: bool | None = None
    created: float | None = None


@dataclass(frozen=True)
class StoredVoice:
    entry: VoiceEntry
    reference: ReferenceAudio


@dataclass
class ReloadReport:
    voices: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class VoiceRegistry:
    """Builtin voices plus the voices of `store` (None: no voices directory, nothing can be stored)."""

    def __init__(
        self,
        store: VoiceStore | None,
        builtins: dict[str, BuiltinVoice],
        freezer: BuiltinFreezer,
        limits: ClipLimits,
    ):
        self.store = store
        self.builtins = builtins
        self.freezer = freezer
        self.limits = limits
        self._voices: dict[str, StoredVoice] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> VoiceRegistry:
        root = settings.voices_dir or default_voices_dir()
        try:
            store: VoiceStore | None = VoiceStore(root)
        except OSError as exc:
            log.warning("voices directory %s is not writable (%s): voices cannot be stored", root, exc)
            store = None
        freezer = BuiltinFreezer(
            store.root / BUILTIN_DIR if store else None, settings.voice_freeze_max_patches
        )
        return cls(
            store,
            load_builtin_voices(settings.builtin_voices_file),
            freezer,
            ClipLimits.from_settings(settings),
        )

    # ------------------------------------------------------------------ reading

    def builtin_names(self) -> list[str]:
        return list(dict.fromkeys((*OPENAI_VOICES, *self.builtins)))

    def names(self, engine: Engine | None = None) -> list[str]:
        """Builtin names (and any the engine adds), then registered voices in name order."""
        extra = engine.info.voices if engine is not None else ()
        return list(dict.fromkeys((*self.builtin_names(), *extra, *sorted(self._voices))))

    def is_reserved(self, name: str) -> bool:
        return name.lower() in {n.lower() for n in self.builtin_names()}

    def info(self, name: str) -> VoiceInfo:
        stored = self._voices.get(name)
        if stored is not None:
            entry, ref = stored.entry, stored.reference
            return VoiceInfo(
                id=name,
                source=entry.source,
                transcript=entry.transcript,
                duration_s=round(ref.samples.size / ref.sample_rate, 3),
                voice_prompt_hash=ref.content_hash,
                cfg_value=entry.cfg_value,
                inference_timesteps=entry.inference_timesteps,
                consent=entry.consent,
                created=entry.created,
            )
        if name in self.builtin_names():
            design = self.builtins.get(name)
            return VoiceInfo(id=name, source="builtin", description=design.description if design else None)
        raise VoiceNotFound(f"voice {name!r} not found", param="voice_id")

    def infos(self, engine: Engine | None = None) -> list[VoiceInfo]:
        known = set(self._voices) | set(self.builtin_names())
        return [self.info(n) if n in known else VoiceInfo(n, "builtin") for n in self.names(engine)]

    # ------------------------------------------------------------------ speaking

    async def resolve(self, name: str, engine: Engine) -> ResolvedVoice:
        """The voice `name` as `engine` will speak it. Builtin voices of an engine that clones are
        frozen on first use. Raises VoiceNotFound, or VoiceUnsupported for a cloned voice on an
        engine that cannot clone."""
        design = self._design_to_freeze(name, engine)
        if design is not None:
            return ResolvedVoice(name, "builtin", await self.freezer.reference(design, innermost(engine)))
        voice = self._resolve_plain(name, engine)
        if voice is None:
            raise VoiceNotFound(
                f"unknown voice {name!r}; GET /v1/audio/voices lists the voices", param="voice"
            )
        return voice

    def resolve_ready(self, name: str, engine: Engine) -> ResolvedVoice | None:
        """`resolve` without waiting: a builtin voice not frozen yet comes without its reference.
        None for an unknown name."""
        design = self._design_to_freeze(name, engine)
        if design is not None:
            return ResolvedVoice(name, "builtin", self.freezer.frozen(design, innermost(engine)))
        return self._resolve_plain(name, engine)

    def _design_to_freeze(self, name: str, engine: Engine) -> BuiltinVoice | None:
        if name in self._voices or not engine.info.can_clone:
            return None
        return self.builtins.get(name)

    def _resolve_plain(self, name: str, engine: Engine) -> ResolvedVoice | None:
        stored = self._voices.get(name)
        if stored is not None:
            if not engine.info.can_clone:
                raise VoiceUnsupported(
                    f"voice {name!r} is a cloned voice and the {engine.info.name} engine cannot clone; "
                    "serve VoxCPM2 (polyvox serve --model CHECKPOINT) to speak with it",
                    param="voice",
                )
            entry = stored.entry
            return ResolvedVoice(
                name, entry.source, stored.reference, entry.cfg_value, entry.inference_timesteps
            )
        if name in self.builtin_names() or name in engine.info.voices:
            return ResolvedVoice(name, "builtin")
        return None

    # ------------------------------------------------------------------ changing (blocking: run in a thread)

    def reload(self) -> ReloadReport:
        """Read `voices.json` and decode every clip it names; voices that fail are skipped and reported.

        A registry file that cannot be parsed raises VoiceStorageUnavailable and changes nothing."""
        report = ReloadReport()
        if self.store is None:
            return report
        entries, report.problems = self.store.read()
        loaded: dict[str, StoredVoice] = {}
        for name, entry in entries.items():
            if self.is_reserved(name):
                report.problems.append(f"voice {name!r} skipped: the name belongs to a builtin voice")
                continue
            path = self.store.clip_path(entry)
            try:
                reference = load_clip(path.read_bytes(), self.limits, "audio", entry.transcript)
            except OSError as exc:
                report.problems.append(
                    f"voice {name!r} skipped: {path} cannot be read ({exc.strerror or exc})"
                )
                continue
            except InvalidVoiceAudio as exc:
                report.problems.append(f"voice {name!r} skipped: {path}: {exc.message}")
                continue
            loaded[name] = StoredVoice(entry, reference)
        with self._lock:
            self._voices = loaded
        report.voices = sorted(loaded)
        for problem in report.problems:
            log.warning("voices: %s", problem)
        return report

    def add(
        self,
        name: str,
        data: bytes,
        filename: str,
        entry: VoiceEntry,
    ) -> tuple[VoiceInfo, bool]:
        """Check and store an uploaded voice (replacing one of the same name); returns its info and
        whether it replaced another."""
        check_name(name)
        if self.is_reserved(name):
            raise VoiceConflict(f"{name!r} is a builtin voice and cannot be replaced", param="name")
        if self.store is None:
            raise VoiceStorageUnavailable("the voices directory is not writable; voices cannot be stored")
        if entry.consent is not True:
            raise VoiceError(
                "consent must be true: confirm the speaker agreed to have their voice cloned",
                param="consent",
                code="consent_required",
            )
        reference = load_clip(data, self.limits, "audio", entry.transcript)
        entry = entry.model_copy(update={"source": "uploaded", "created": time.time()})
        suffix = Path(filename or "").suffix
        with self._lock:
            previous = self.store.put(name, data, suffix, entry)
            stored = StoredVoice(entry.model_copy(update={"audio": ""}), reference)
            self._voices = {**self._voices, name: stored}
        return self.info(name), previous is not None

    def delete(self, name: str) -> None:
        if self.is_reserved(name):
            raise VoiceConflict(f"{name!r} is a builtin voice and cannot be deleted", param="voice_id")
        if name not in self._voices or self.store is None:
            raise VoiceNotFound(f"voice {name!r} not found", param="voice_id")
        with self._lock:
            self.store.remove(name)
            self._voices = {k: v for k, v in self._voices.items() if k != name}

    @property
    def freezes(self) -> int:
        return self.freezer.freezes


def innermost(engine: Engine) -> Engine:
    """The engine under any wrappers (the text front end's `inner`): builtin voices are frozen by the
    model engine itself, in one piece."""
    while getattr(engine, "inner", None) is not None:
        engine = engine.inner
    return engine
