"""`VoiceRegistry`: every voice the server knows (builtin designs; registered, uploaded and designed
clips), turned into what a synthesis request needs: a `ResolvedVoice` carrying the reference clip and
the clip's content hash, which is what caches key on (never the voice's name). It also makes voices
(from a clip citing consent, or from a text prompt) and keeps consents and voices consistent.

A voice's id is its `name` when that is a valid voice name (posting it again replaces the voice);
any other name (OpenAI's free-form "My new voice") is kept as the voice's label under a new id
`voice_<hex>`."""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio

from polyvox.audio.errors import AudioDecodeError
from polyvox.backends.base import OPENAI_VOICES, Backend, BackendInfo, ReferenceAudio
from polyvox.backends.errors import BackendInputError
from polyvox.files.dir_format import DirectoryFormat, DirectoryFormatError
from polyvox.files.file_stamp import FileStamp, file_stamp
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings
from polyvox.voices.builtin import BUILTIN_DIR, BuiltinFreezer, default_script, load_builtin_voices
from polyvox.voices.clips import ClipLimits, clip_rate, content_hash, load_clip
from polyvox.voices.consents import ConsentStore
from polyvox.voices.design import FrozenPrompt, VoiceDesign, freeze_design, reference_of
from polyvox.voices.detail import VoiceDetail
from polyvox.voices.errors import (
    ConsentInUse,
    ConsentNotFound,
    InvalidVoiceAudio,
    VoiceConflict,
    VoiceError,
    VoiceNotFound,
    VoiceStorageUnavailable,
    VoiceUnsupported,
    uncitable_consent,
    unknown_voice,
)
from polyvox.voices.store import (
    NAME_PATTERN,
    VoiceEntry,
    VoiceStore,
    check_name,
    check_text,
    default_voices_dir,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedVoice:
    """A voice ready to speak: its reference clip (None: the back end's own voice of that name) and
    the settings it brings."""

    name: str
    source: str  # builtin, registered or uploaded
    reference: ReferenceAudio | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    lora: str | None = None  # the LoRA adapter it speaks with (a voice that is an adapter)
    emotion: str | None = None  # its default `emotion`, for a request that names none
    owner: str | None = None  # the API key it belongs to (None: every key's)
    shared: bool = False  # other keys may speak it too

    @property
    def stored(self) -> bool:
        """A voice of the voices directory (a clip: registered, uploaded or designed)."""
        return self.source not in ("builtin", "adapter")

    @property
    def voice_prompt_hash(self) -> str | None:
        """The content hash of the voice's prompt clip: what a cache key holds for this voice."""
        return self.reference.content_hash if self.reference is not None else None


@dataclass(frozen=True)
class StoredVoice:
    entry: VoiceEntry
    reference: ReferenceAudio


@dataclass
class ReloadReport:
    voices: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# The voices directory's layout (voices.json, uploads/, builtin/, consents): 1 since format versions began.
VOICES_FORMAT = DirectoryFormat("voices_dir", 1)


def open_voices_dir(root: Path, default: bool) -> VoiceStore:
    """The voices directory `root` (the `voices_dir` setting, or its `default`), checked at start: made
    if need be, readable and writable, its `voices.json` readable and well-formed. StartupError naming
    the directory or the file and what is wrong, otherwise."""
    setting = f"voices_dir (default {root})" if default else f"voices_dir = {root}"
    try:
        store = VoiceStore(root)
        VOICES_FORMAT.ensure(root)
    except DirectoryFormatError as exc:
        raise StartupError(str(exc)) from exc
    except OSError as exc:
        reason = "not a directory" if root.exists() and not root.is_dir() else exc.strerror or str(exc)
        raise StartupError(
            f"{setting}: {reason}; the voices directory must be readable and writable by this user: "
            "fix it, or point voices_dir elsewhere"
        ) from exc
    try:
        store.read()
    except VoiceStorageUnavailable as exc:
        raise StartupError(
            f"{setting}: {exc.message}; fix the file (or restore it from a backup) and start again"
        ) from exc
    return store


def voice_id_for(name: str) -> tuple[str, str | None]:
    """The id a new voice called `name` gets, and its label (None: the id is the name)."""
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
        return name, None
    return f"voice_{secrets.token_hex(8)}", check_text(name, "name")


class VoiceRegistry:
    """Builtin voices plus the voices of `store` (None: no voices directory, nothing can be stored).

    `design_script` is the sentence and seed a voice made from a prompt is frozen speaking, unless
    the request brings its own sentence. `clip_rate` is the rate stored clips are decoded to: the
    rate the served back end takes references at (`clips.clip_rate` of its info). An uploaded clip's
    transcript is at most `max_transcript_chars` characters, as a one-off clone's `ref_text` is."""

    def __init__(
        self,
        store: VoiceStore | None,
        builtins: dict[str, VoiceDesign],
        freezer: BuiltinFreezer,
        limits: ClipLimits,
        design_script: tuple[str, int],
        clip_rate: int,
        max_transcript_chars: int | None = None,
    ):
        self.store = store
        self.max_transcript_chars = max_transcript_chars
        self.consents = ConsentStore(store) if store is not None else None
        self.builtins = builtins
        self.freezer = freezer
        self.limits = limits
        self.clip_rate = clip_rate
        self.design_script = design_script
        self._voices: dict[str, StoredVoice] = {}
        self._seen: FileStamp = None  # voices.json as this registry last read or wrote it
        # voices.json as it last failed to be read, and why (None: it reads cleanly)
        self._broken: tuple[FileStamp, str] | None = None
        self._lock = threading.Lock()  # taken after the directory's lock, never before it

    @classmethod
    def from_settings(cls, settings: Settings, backend: BackendInfo) -> VoiceRegistry:
        """The registry `settings` describe, decoding clips for the back end `backend` describes.

        StartupError when the voices directory cannot be used (made, read and written) or its
        `voices.json` cannot be read: a server that started without them would serve builtin voices
        only, and the registered ones would just be missing."""
        store = open_voices_dir(settings.voices_dir or default_voices_dir(), settings.voices_dir is None)
        freezer = BuiltinFreezer(store.root / BUILTIN_DIR, settings.voice_freeze_max_patches, store.locked)
        return cls(
            store,
            load_builtin_voices(settings.builtin_voices_file),
            freezer,
            ClipLimits.from_settings(settings),
            default_script(settings.builtin_voices_file),
            clip_rate(backend),
            settings.max_input_chars,
        )

    # ------------------------------------------------------------------ reading

    @property
    def problem(self) -> str | None:
        """Why `voices.json` cannot be read now, while the voices loaded before keep serving; None when
        it reads cleanly."""
        broken = self._broken
        return broken[1] if broken is not None else None

    def builtin_names(self) -> list[str]:
        return list(dict.fromkeys((*OPENAI_VOICES, *self.builtins)))

    def names(self, backend: Backend | None = None) -> list[str]:
        """Builtin names (and any the back end adds), then registered voices in name order, then the
        back end's LoRA adapters."""
        extra = backend.info.voices if backend is not None else ()
        adapters = sorted(backend.adapters()) if backend is not None else ()
        return list(dict.fromkeys((*self.builtin_names(), *extra, *sorted(self._voices), *adapters)))

    def access_of(self, name: str) -> tuple[str | None, bool]:
        """A stored voice's owner (the API key that made it; None: every key's, as builtin and
        registered voices and those made with the settings' keys are) and whether it is shared."""
        stored = self._voices.get(name)
        return (stored.entry.owner, stored.entry.shared) if stored is not None else (None, False)

    def is_stored(self, name: str) -> bool:
        return name in self._voices

    def is_reserved(self, name: str) -> bool:
        return name.lower() in {n.lower() for n in self.builtin_names()}

    def info(self, name: str, backend: Backend | None = None) -> VoiceDetail:
        """The voice `name`: stored, builtin, or one of `backend`'s LoRA adapters."""
        stored = self._voices.get(name)
        if stored is not None:
            entry, ref = stored.entry, stored.reference
            return VoiceDetail.of(
                name,
                entry.source,
                label=entry.label,
                transcript=entry.transcript,
                duration_s=round(ref.samples.size / ref.sample_rate, 3),
                voice_prompt_hash=ref.content_hash,
                cfg_value=entry.cfg_value,
                inference_timesteps=entry.inference_timesteps,
                emotion=entry.emotion,
                consent=entry.consent,
                consent_id=entry.consent_id,
                prompt=entry.prompt,
                created=entry.created,
            )
        if name in self.builtin_names():
            # The back end's own word on its voice first (the embedded voice's delivery), else the design.
            described = backend.info.voice_descriptions.get(name) if backend is not None else None
            design = self.builtins.get(name)
            designed = design.description if design else None
            # A builtin voice of a back end with voice design is spoken from its design: OpenAI's prompt.
            designs = backend is not None and backend.info.capabilities.voice_design and designed
            return VoiceDetail.of(
                name,
                "builtin",
                description=described or designed,
                type="prompt" if designs else "audio_sample",
                prompt=designed if designs else None,
            )
        adapter = backend.adapters().get(name) if backend is not None else None
        if adapter is not None:
            return VoiceDetail.of(name, "adapter", description=f"LoRA adapter, rank {adapter.rank}")
        raise VoiceNotFound(f"voice {name!r} not found", param="voice_id")

    def infos(self, backend: Backend | None = None) -> list[VoiceDetail]:
        known = set(self._voices) | set(self.builtin_names())
        if backend is not None:
            known |= set(backend.adapters())
        return [
            self.info(n, backend) if n in known else VoiceDetail.of(n, "builtin") for n in self.names(backend)
        ]

    # ------------------------------------------------------------------ speaking

    async def resolve(self, name: str, backend: Backend) -> ResolvedVoice:
        """The voice `name` as `backend` will speak it: `find`, then `ready`."""
        return await self.ready(await self.find(name, backend), backend)

    async def find(self, name: str, backend: Backend) -> ResolvedVoice:
        """The voice `name`, looked up once (`voices.json` read again on a miss: another server sharing
        the directory may have made it), with its owner, so that a caller's right to it is checked
        before anything slow; `ready` makes it speakable. VoiceNotFound for a name no voice has."""
        voice = self._find(name, backend)
        if voice is None and await anyio.to_thread.run_sync(self.refresh):
            voice = self._find(name, backend)
        if voice is None:
            raise unknown_voice(name)
        return voice

    async def ready(self, voice: ResolvedVoice, backend: Backend) -> ResolvedVoice:
        """`voice` as `backend` will speak it: a builtin voice of a back end that clones frozen into its
        reference on first use (once, however many requests ask). VoiceUnsupported for a stored voice
        on a back end that cannot clone."""
        if voice.stored and not backend.info.capabilities.cloning:
            raise cannot_clone(f"voice {voice.name!r} is", backend.info, "voice")
        design = self._design_to_freeze(voice, backend)
        if design is None:
            return voice
        return replace(voice, reference=await self.freezer.reference(design, backend))

    def _design_to_freeze(self, voice: ResolvedVoice, backend: Backend) -> VoiceDesign | None:
        if voice.source != "builtin" or voice.reference is not None:
            return None
        return self.builtins.get(voice.name) if stores_designed_voices(backend.info) else None

    def _find(self, name: str, backend: Backend) -> ResolvedVoice | None:
        stored = self._voices.get(name)
        if stored is not None:
            entry = stored.entry
            return ResolvedVoice(
                name,
                entry.source,
                stored.reference,
                entry.cfg_value,
                entry.inference_timesteps,
                emotion=entry.emotion,
                owner=entry.owner,
                shared=entry.shared,
            )
        if name in self.builtin_names() or name in backend.info.voices:
            return ResolvedVoice(name, "builtin")
        if name in backend.adapters():
            return ResolvedVoice(name, "adapter", lora=name)
        return None

    # ------------------------------------------------------------------ changing (blocking: run in a thread)

    def reload(self) -> ReloadReport:
        """Read `voices.json` and decode every clip it names (a clip already decoded, the same bytes,
        is reused); voices that fail are skipped and reported, as is a lost `voices.json` or
        `consents.json`.

        A registry file that cannot be read or parsed raises VoiceStorageUnavailable and changes
        nothing but `problem`."""
        if self.store is None:
            return ReloadReport()
        with self._lock:
            return self._reload(self.store)

    def refresh(self) -> bool:
        """Reload when `voices.json` changed since this registry last read or wrote it (another server
        sharing the directory changed it); True when it reloaded. One stat when nothing changed; a file
        that cannot be read is logged once (`problem` says why) and left alone until it changes again."""
        if self.store is None or not self._changed(file_stamp(self.store.registry_path)):
            return False
        with self._lock:
            if not self._changed(file_stamp(self.store.registry_path)):
                return False  # another thread reloaded it while this one waited
            try:
                self._reload(self.store)
            except VoiceStorageUnavailable:
                return False
        return True

    def _changed(self, stamp: FileStamp) -> bool:
        """Whether `voices.json` is neither as last read or written nor as it last failed to be read."""
        return stamp != self._seen and (self._broken is None or stamp != self._broken[0])

    def _reload(self, store: VoiceStore) -> ReloadReport:
        report = ReloadReport()
        # taken before reading, so a later write shows next time; recorded once the voices are in place,
        # so a `refresh` racing this reload waits for it on the lock instead of finding nothing to do
        seen = file_stamp(store.registry_path)
        try:
            entries, report.problems = store.read()
        except VoiceStorageUnavailable as exc:
            self._broke(seen, exc.message)
            raise
        if self._broken is not None:
            log.info("voices: %s reads again; its voices are served", store.registry_path)
            self._broken = None
        decoded = {_clip_key(v.entry, v.reference.content_hash): v.reference for v in self._voices.values()}
        lost_consents = self.consents.lost_index() if self.consents is not None else None
        if lost_consents:
            report.problems.append(lost_consents)
        loaded: dict[str, StoredVoice] = {}
        for name, entry in entries.items():
            if self.is_reserved(name):
                report.problems.append(f"voice {name!r} skipped: the name belongs to a builtin voice")
                continue
            path = store.clip_path(entry)
            try:
                data = path.read_bytes()
                reference = decoded.get(_clip_key(entry, content_hash(data))) or self._reference(data, entry)
            except OSError as exc:
                report.problems.append(
                    f"voice {name!r} skipped: {path} cannot be read ({exc.strerror or exc})"
                )
                continue
            except InvalidVoiceAudio as exc:
                report.problems.append(f"voice {name!r} skipped: {path}: {exc.message}")
                continue
            loaded[name] = StoredVoice(entry, reference)
        self._voices, self._seen = loaded, seen
        report.voices = sorted(loaded)
        for problem in report.problems:
            log.warning("voices: %s", problem)
        return report

    def _broke(self, stamp: FileStamp, message: str) -> None:
        """Log that `voices.json` (as `stamp` shows it) cannot be read: an error as it breaks, a warning
        each time the reason changes while it stays broken (a file caught half written, then wholly
        written but still wrong, is one incident), nothing while it stays as it is."""
        if self._broken is None:
            log.error(
                "voices: %s; serving the %d registered voice(s) read before until it is fixed "
                "(GET /ready says so meanwhile)",
                message,
                len(self._voices),
            )
        elif self._broken[1] != message:
            log.warning("voices: still cannot be read: %s", message)
        self._broken = (stamp, message)

    def _reference(self, data: bytes, entry: VoiceEntry) -> ReferenceAudio:
        """A stored clip as a reference: a designed voice's clip is generated audio (no upload checks)."""
        if entry.source != "designed":
            return load_clip(data, self.limits, self.clip_rate, "audio", entry.transcript)
        try:
            return reference_of(FrozenPrompt(data, entry.transcript), self.clip_rate)
        except AudioDecodeError as exc:
            raise InvalidVoiceAudio(str(exc), "audio") from exc

    def sweep(self) -> list[Path]:
        """Delete what interrupted writes left in the voices directory (see `VoiceStore.sweep`)."""
        if self.store is None or self.consents is None:
            return []
        return self.store.sweep(BUILTIN_DIR) + self.consents.sweep()

    async def add(
        self,
        name: str,
        data: bytes,
        filename: str,
        entry: VoiceEntry,
        backend: Backend,
        param: str = "audio",
    ) -> tuple[VoiceDetail, bool]:
        """Check and store a voice from an uploaded clip (`param` names its field), replacing one of
        the same id; it needs consent: `entry.consent_id` citing a consent recording, or
        `entry.consent` true. Returns its info and whether it replaced another.

        Only a voice `backend` could speak is stored: the clip is checked first (a bad clip is a 400
        whatever the back end), then a back end that cannot clone refuses it as it would refuse to speak
        it (VoiceUnsupported), and one that clones checks the clip and transcript fit its prompts
        (`Backend.check_voice`: VoiceUnsupported with the back end's reason; BackendError while it
        cannot be asked)."""
        voice_id, label = voice_id_for(name)
        self._changeable(voice_id)
        if entry.consent_id is None and entry.consent is not True:
            raise VoiceError(
                "consent: give the id of the speaker's consent recording (POST /v1/audio/voice_consents) "
                "or true to confirm the speaker agreed to have their voice cloned",
                param="consent",
                code="consent_required",
            )
        limit, transcript = self.max_transcript_chars, entry.transcript or ""
        if limit is not None and len(transcript) > limit:
            raise VoiceError(
                f"transcript is {len(transcript)} characters; the limit is {limit} (max_input_chars)",
                param="transcript",
                code="transcript_too_long",
            )
        reference = await anyio.to_thread.run_sync(
            load_clip, data, self.limits, self.clip_rate, param, entry.transcript
        )
        if not backend.info.capabilities.cloning:
            raise cannot_clone("a voice made from a clip is", backend.info, param)
        try:
            await backend.check_voice(reference)
        except BackendInputError as exc:  # named as the upload names the clip and its transcript
            at_fault = {"ref_text": "transcript", "reference": param}.get(exc.param or "", exc.param)
            raise VoiceUnsupported(exc.message, param=at_fault, code=exc.code) from exc
        entry = entry.model_copy(update={"label": label, "source": "uploaded"})
        suffix = Path(filename or "").suffix
        return await anyio.to_thread.run_sync(self._store_upload, voice_id, data, suffix, entry, reference)

    def _store_upload(
        self, voice_id: str, data: bytes, suffix: str, entry: VoiceEntry, reference: ReferenceAudio
    ) -> tuple[VoiceDetail, bool]:
        store = self._changeable(voice_id)
        with store.locked():  # the cited consent cannot be deleted before the voice is stored
            if entry.consent_id is not None:
                self._check_consent(entry.consent_id)
                entry = entry.model_copy(update={"consent": True})
            return self._store_voice(voice_id, data, suffix, entry, reference)

    async def design(
        self,
        name: str,
        prompt: str,
        script: str | None,
        backend: Backend,
        owner: str | None = None,
        shared: bool = False,
    ) -> tuple[VoiceDetail, bool]:
        """Make a voice from a description: the back end designs it speaking `script` (default: the
        builtin voices' sentence) with a fixed seed, once, and the clip is stored as the voice.
        Raises VoiceUnsupported when the back end cannot clone (it would never speak with it)."""
        voice_id, label = voice_id_for(name)
        self._changeable(voice_id)
        if not stores_designed_voices(backend.info):
            lacks = "cannot design" if backend.info.capabilities.cloning else "can do neither"
            raise VoiceUnsupported(
                f"a voice made from a prompt is designed and then cloned by VoxCPM2; the "
                f"{backend.info.name} engine {lacks}: serve VoxCPM2 "
                "(polyvox serve --model CHECKPOINT) to create voices from a prompt",
                param="prompt",
                code="voice_design_unsupported",
            )
        text, seed = self.design_script
        design = VoiceDesign(voice_id, prompt, script or text, seed)
        frozen = await freeze_design(design, backend, self.freezer.max_patches)
        reference = await anyio.to_thread.run_sync(reference_of, frozen, self.clip_rate)
        entry = VoiceEntry(
            audio="",
            transcript=frozen.transcript,
            label=label,
            prompt=prompt,
            source="designed",
            owner=owner,
            shared=shared,
        )
        return await anyio.to_thread.run_sync(
            self._store_voice, voice_id, frozen.wav, ".wav", entry, reference
        )

    def _changeable(self, voice_id: str) -> VoiceStore:
        check_name(voice_id)
        if self.is_reserved(voice_id):
            raise VoiceConflict(f"{voice_id!r} is a builtin voice and cannot be replaced", param="name")
        if self.store is None:
            raise VoiceStorageUnavailable("the voices directory is not writable; voices cannot be stored")
        return self.store

    def _check_consent(self, consent_id: str) -> None:
        try:
            self.consent_store().get(consent_id)
        except ConsentNotFound as exc:
            raise uncitable_consent(consent_id) from exc

    @contextlib.contextmanager
    def _writing(self, store: VoiceStore) -> Iterator[None]:
        """Hold the directory's lock, then the registry's, around a change to `voices.json` and to
        `_voices` (a reload cannot interleave and drop it). When no other server changed the file since
        this registry read it, the file as written is taken as read: no reload for a change of its own."""
        with store.locked(), self._lock:
            current = file_stamp(store.registry_path) == self._seen
            yield
            if current:
                self._seen = file_stamp(store.registry_path)

    def _store_voice(
        self, voice_id: str, data: bytes, suffix: str, entry: VoiceEntry, reference: ReferenceAudio
    ) -> tuple[VoiceDetail, bool]:
        entry = entry.model_copy(update={"created": time.time()})
        store = self._changeable(voice_id)
        with self._writing(store):
            previous = store.put(voice_id, data, suffix, entry)
            self._voices = {**self._voices, voice_id: StoredVoice(entry, reference)}
        return self.info(voice_id), previous is not None

    def rename(self, voice_id: str, name: object) -> VoiceDetail:
        """Give a stored voice a new display name (checked as a new voice's free-form name is); its
        id, clip and prompt hash stay. A builtin voice keeps its name (VoiceConflict)."""
        if isinstance(voice_id, str) and self.is_reserved(voice_id):
            raise VoiceConflict(
                f"{voice_id!r} is a builtin voice; only voices created or registered here can be renamed",
                param="voice_id",
            )
        label = check_text(name, "name", max_chars=256)
        if voice_id not in self._voices or self.store is None:
            raise VoiceNotFound(f"voice {voice_id!r} not found", param="voice_id")
        with self._writing(self.store):
            stored = self._voices.get(voice_id)
            if stored is None:
                raise VoiceNotFound(f"voice {voice_id!r} not found", param="voice_id")
            # A name equal to the id is no label: the voice is shown by its id, as when created so.
            new_label = None if label == voice_id else label
            self.store.relabel(voice_id, new_label)
            entry = stored.entry.model_copy(update={"label": new_label})
            self._voices = {**self._voices, voice_id: StoredVoice(entry, stored.reference)}
        return self.info(voice_id)

    def delete(self, name: str) -> None:
        if self.is_reserved(name):
            raise VoiceConflict(f"{name!r} is a builtin voice and cannot be deleted", param="voice_id")
        if name not in self._voices or self.store is None:
            raise VoiceNotFound(f"voice {name!r} not found", param="voice_id")
        with self._writing(self.store):
            self.store.remove(name)
            self._voices = {k: v for k, v in self._voices.items() if k != name}

    def consent_store(self) -> ConsentStore:
        if self.consents is None:
            raise VoiceStorageUnavailable("the voices directory is not writable; consents cannot be stored")
        return self.consents

    def delete_consent(self, consent_id: str) -> None:
        """Delete a consent recording no voice cites (ConsentInUse names the voices that do)."""
        consents = self.consent_store()
        with consents.store.locked():
            citing = consents.store.entries_citing(consent_id)
            if citing:
                raise ConsentInUse(
                    f"consent recording {consent_id!r} is cited by voice(s) {', '.join(citing)}; "
                    "delete them first",
                    param="consent_id",
                )
            consents.delete(consent_id)

    @property
    def freezes(self) -> int:
        return self.freezer.freezes


def _clip_key(entry: VoiceEntry, clip_hash: str) -> tuple[bool, str, str | None]:
    """What a decoded clip depends on: its bytes, its transcript, and whether it is generated audio
    (a designed voice's clip skips the upload checks)."""
    return entry.source == "designed", clip_hash, entry.transcript or None


def cannot_clone(subject: str, engine: BackendInfo, param: str) -> VoiceUnsupported:
    """The refusal of a cloned voice by a back end that cannot clone, in one wording whether the voice is
    spoken or uploaded: "`subject` a cloned voice and the ... engine cannot clone; ..."."""
    return VoiceUnsupported(
        f"{subject} a cloned voice and the {engine.name} engine cannot clone; serve VoxCPM2 "
        "(polyvox serve --model CHECKPOINT) to speak with it",
        param=param,
    )


def stores_designed_voices(info: BackendInfo) -> bool:
    """Whether the back end can make a voice from a description and keep it to speak with: it designs
    (`voice_design`) and clones the clip it designed (`cloning`). Builtin voices of such a back end are
    designed voices, frozen on first use. (`models.architectures.designs_voices` is the model's half:
    whether `instructions` can describe a voice at all.)"""
    return info.capabilities.voice_design and info.capabilities.cloning
