"""Builtin voices: the OpenAI names, each a voice design (a description) in `builtin_voices.json`.

With an engine that can clone, a builtin voice is frozen on first use: the engine speaks the file's
sentence as "(description)text" with the file's fixed seed, and the audio is written to
`<voices_dir>/builtin/` as a WAV plus a JSON sidecar. From then on that clip is the voice's reference
prompt, so the voice sounds the same on every request and after restarts. The file name carries a
hash of the model id, description, sentence, seed and length cap, so a change to any of them freezes
the voice anew.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import anyio
import numpy as np

from polyvox.audio.decode import decode_audio
from polyvox.audio.encode import encode_audio
from polyvox.engines.base import Engine, ReferenceAudio, SynthesisRequest
from polyvox.voices.clips import CLIP_RATE, content_hash
from polyvox.voices.store import atomic_write

log = logging.getLogger(__name__)

FREEZE_FORMAT = 1
BUILTIN_DIR = "builtin"


@dataclass(frozen=True)
class BuiltinVoice:
    name: str
    description: str
    text: str
    seed: int


def load_builtin_voices(path: Path | None = None) -> dict[str, BuiltinVoice]:
    """The voice designs of `path` (default: the file shipped with polyvox), by name."""
    if path is None:
        raw = resources.files("polyvox.voices").joinpath("builtin_voices.json").read_text(encoding="utf-8")
    else:
        raw = Path(path).read_text(encoding="utf-8")
    data = json.loads(raw)
    voices = {}
    for name, item in data["voices"].items():
        voices[name] = BuiltinVoice(
            name=name,
            description=item["description"],
            text=item.get("text", data["text"]),
            seed=int(item.get("seed", data["seed"])),
        )
    return voices


@dataclass(frozen=True)
class FrozenPrompt:
    """A builtin voice's frozen clip: the WAV's bytes and the transcript it may be continued from."""

    wav: bytes
    transcript: str | None


class BuiltinFreezer:
    """Freezes builtin voices into reference clips in `directory` (None: in memory only)."""

    def __init__(self, directory: Path | None, max_patches: int):
        self.directory = directory
        self.max_patches = max_patches
        self.freezes = 0
        self._memory: dict[str, ReferenceAudio] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def key(self, voice: BuiltinVoice, model_id: str) -> str:
        blob = json.dumps(
            [FREEZE_FORMAT, model_id, voice.description, voice.text, voice.seed, self.max_patches]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def path(self, voice: BuiltinVoice, model_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / f"{voice.name}-{self.key(voice, model_id)}.wav"

    def frozen(self, voice: BuiltinVoice, engine: Engine) -> ReferenceAudio | None:
        """The voice's reference if it is already frozen in this process, else None."""
        return self._memory.get(f"{voice.name}-{self.key(voice, engine.info.model_id)}")

    async def reference(self, voice: BuiltinVoice, engine: Engine) -> ReferenceAudio:
        """The voice's frozen clip as a reference: read from disk, or generated now (once, however
        many requests ask at the same time)."""
        key = f"{voice.name}-{self.key(voice, engine.info.model_id)}"
        if key in self._memory:
            return self._memory[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._memory:
                path = self.path(voice, engine.info.model_id)
                frozen = await anyio.to_thread.run_sync(_read_frozen, path)
                if frozen is None:
                    frozen = await self._freeze(voice, engine)
                    await anyio.to_thread.run_sync(_write_frozen, path, frozen)
                self._memory[key] = await anyio.to_thread.run_sync(reference_of, frozen)
        return self._memory[key]

    async def _freeze(self, voice: BuiltinVoice, engine: Engine) -> FrozenPrompt:
        request = SynthesisRequest(
            text=voice.text,
            voice=voice.name,
            instructions=voice.description,
            seed=voice.seed,
            max_patches=self.max_patches,
            request_id=f"freeze-{voice.name}",
        )
        chunks = [np.asarray(chunk, dtype=np.float32).reshape(-1) async for chunk in engine.generate(request)]
        self.freezes += 1
        # A capped generation may not have said the whole sentence: then the clip is cloned without
        # its transcript, so the model is never told the audio contains words it does not.
        patch_cap_hit = len(chunks) >= self.max_patches
        samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        wav = encode_audio(samples, engine.info.sample_rate, "wav")
        log.info(
            "builtin voice %s frozen: %.2f s of audio%s",
            voice.name,
            samples.size / engine.info.sample_rate,
            " (length cap reached)" if patch_cap_hit else "",
        )
        return FrozenPrompt(wav, None if patch_cap_hit else voice.text)


def reference_of(frozen: FrozenPrompt) -> ReferenceAudio:
    """The frozen clip as a ReferenceAudio keyed by its bytes' hash (generated audio: no upload checks)."""
    samples = decode_audio(frozen.wav, CLIP_RATE)
    return ReferenceAudio(samples, CLIP_RATE, content_hash(frozen.wav), frozen.transcript)


def _read_frozen(path: Path | None) -> FrozenPrompt | None:
    if path is None:
        return None
    try:
        wav = path.read_bytes()
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return FrozenPrompt(wav, meta.get("transcript"))


def _write_frozen(path: Path | None, frozen: FrozenPrompt) -> None:
    """Sidecar first, WAV last: a WAV on disk always has its sidecar. A failure only logs."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"transcript": frozen.transcript, "sha256": hashlib.sha256(frozen.wav).hexdigest()}
        atomic_write(path.with_suffix(".json"), json.dumps(meta).encode())
        atomic_write(path, frozen.wav)
    except Exception as exc:
        log.warning(
            "builtin voice prompt not saved to %s (%s); it will be frozen again next start", path, exc
        )
