"""Builtin voices: the OpenAI names, each a voice design (a description) in `builtin_voices.json`.

With a back end that can clone, a builtin voice is frozen on first use (see `design`): the audio is
written to `<voices_dir>/builtin/` as a WAV plus a JSON sidecar. From then on that clip is the voice's
reference prompt, so the voice sounds the same on every request and after restarts. The file name
carries a hash of the model id, description, sentence, seed and length cap, so a change to any of
them freezes the voice anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path

import anyio

from polyvox.backends.base import Backend, ReferenceAudio
from polyvox.runtime.metrics_files import shared_counter
from polyvox.voices.clips import clip_rate
from polyvox.voices.design import FrozenPrompt, VoiceDesign, freeze_design, reference_of
from polyvox.voices.store import atomic_write

log = logging.getLogger(__name__)

FREEZE_FORMAT = 1
BUILTIN_DIR = "builtin"


def _builtin_file(path: Path | None) -> dict:
    if path is None:
        raw = resources.files("polyvox.voices").joinpath("builtin_voices.json").read_text(encoding="utf-8")
    else:
        raw = Path(path).read_text(encoding="utf-8")
    return json.loads(raw)


def load_builtin_voices(path: Path | None = None) -> dict[str, VoiceDesign]:
    """The voice designs of `path` (default: the file shipped with polyvox), by name."""
    data = _builtin_file(path)
    voices = {}
    for name, item in data["voices"].items():
        voices[name] = VoiceDesign(
            name=name,
            description=item["description"],
            text=item.get("text", data["text"]),
            seed=int(item.get("seed", data["seed"])),
        )
    return voices


def default_script(path: Path | None = None) -> tuple[str, int]:
    """The sentence and seed of `path` that a design is frozen with unless it brings its own."""
    data = _builtin_file(path)
    return data["text"], int(data["seed"])


FREEZES = "polyvox_voice_builtin_freezes"
FREEZES_HELP = "Builtin voices generated and frozen into a reference prompt."


class BuiltinFreezer:
    """Freezes builtin voices into reference clips in `directory` (None: in memory only); `lock`
    guards the directory's writes (the voices directory's lock)."""

    def __init__(
        self,
        directory: Path | None,
        max_patches: int,
        lock: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ):
        self.directory = directory
        self.max_patches = max_patches
        self.lock = lock
        self.freezes = 0
        # behind several API processes, also counted where a scrape of any of them sums it
        self._shared_freezes = shared_counter(FREEZES, FREEZES_HELP, [])
        self._memory: dict[str, ReferenceAudio] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def key(self, voice: VoiceDesign, model_id: str) -> str:
        blob = json.dumps(
            [FREEZE_FORMAT, model_id, voice.description, voice.text, voice.seed, self.max_patches]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def path(self, voice: VoiceDesign, model_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / f"{voice.name}-{self.key(voice, model_id)}.wav"

    def frozen(self, voice: VoiceDesign, backend: Backend) -> ReferenceAudio | None:
        """The voice's reference if it is already frozen in this process, else None."""
        return self._memory.get(f"{voice.name}-{self.key(voice, backend.info.model_id)}")

    async def reference(self, voice: VoiceDesign, backend: Backend) -> ReferenceAudio:
        """The voice's frozen clip as a reference: read from disk, or generated now (once, however
        many requests ask at the same time)."""
        key = f"{voice.name}-{self.key(voice, backend.info.model_id)}"
        if key in self._memory:
            return self._memory[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._memory:
                path = self.path(voice, backend.info.model_id)
                frozen = await anyio.to_thread.run_sync(_read_frozen, path)
                if frozen is None:
                    frozen = await freeze_design(voice, backend, self.max_patches)
                    self.freezes += 1
                    if self._shared_freezes is not None:
                        self._shared_freezes.inc()
                    await anyio.to_thread.run_sync(self._write_frozen, path, frozen)
                self._memory[key] = await anyio.to_thread.run_sync(
                    reference_of, frozen, clip_rate(backend.info)
                )
        return self._memory[key]

    def _write_frozen(self, path: Path | None, frozen: FrozenPrompt) -> None:
        """Sidecar first, WAV last: a WAV on disk always has its sidecar. A failure only logs."""
        if path is None:
            return
        try:
            with self.lock():
                path.parent.mkdir(parents=True, exist_ok=True)
                meta = {"transcript": frozen.transcript, "sha256": hashlib.sha256(frozen.wav).hexdigest()}
                atomic_write(path.with_suffix(".json"), json.dumps(meta).encode())
                atomic_write(path, frozen.wav)
        except Exception as exc:
            log.warning(
                "builtin voice prompt not saved to %s (%s); it will be frozen again next start", path, exc
            )


def _read_frozen(path: Path | None) -> FrozenPrompt | None:
    if path is None:
        return None
    try:
        wav = path.read_bytes()
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return FrozenPrompt(wav, meta.get("transcript"))
