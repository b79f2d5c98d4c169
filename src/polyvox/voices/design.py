"""Voice design frozen into a clip: a back end that clones speaks a sentence as "(description)text"
with a fixed seed, once, and the audio becomes the voice's reference prompt. Builtin voices and
voices created from a text prompt are both made this way, so each sounds the same on every request."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import anyio
import numpy as np

from polyvox.audio.decode import decode_audio
from polyvox.audio.encode import encode_audio
from polyvox.backends.base import Backend, ReferenceAudio, SynthesisRequest
from polyvox.backends.errors import AudioLost
from polyvox.backends.rerun import opened, sent
from polyvox.voices.clips import content_hash

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VoiceDesign:
    """A voice as a description, the sentence it is frozen speaking, and the seed it is made with."""

    name: str
    description: str
    text: str
    seed: int


@dataclass(frozen=True)
class FrozenPrompt:
    """A designed voice's frozen clip: the WAV's bytes and the transcript it may be continued from."""

    wav: bytes
    transcript: str | None


async def freeze_design(design: VoiceDesign, backend: Backend, max_patches: int) -> FrozenPrompt:
    """Generate the design's clip with `backend` (the model's back end itself, not a text front end)."""
    request = SynthesisRequest(
        text=design.text,
        voice=design.name,
        instructions=design.description,
        seed=design.seed,
        max_patches=max_patches,
        request_id=f"freeze-{design.name}",
    )
    chunks = await _clip(backend, request)
    # A capped generation may not have said the whole sentence: then the clip is cloned without
    # its transcript, so the model is never told the audio contains words it does not.
    patch_cap_hit = len(chunks) >= max_patches
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    wav = await anyio.to_thread.run_sync(encode_audio, samples, backend.info.sample_rate, "wav")
    log.info(
        "voice %s frozen: %.2f s of audio%s",
        design.name,
        samples.size / backend.info.sample_rate,
        " (length cap reached)" if patch_cap_hit else "",
    )
    return FrozenPrompt(wav, None if patch_cap_hit else design.text)


async def _clip(backend: Backend, request: SynthesisRequest) -> list[np.ndarray]:
    """The request's audio, whole, its piece sent through `rerun.sent`; generated again from its start
    (the same seed: the same clip) if the back end lost part of it, since nothing of it was used yet
    (`rerun.opened` decides)."""

    async def whole() -> AsyncGenerator[list[np.ndarray], None]:
        async with contextlib.aclosing(sent(backend, request)) as chunks:
            yield [np.asarray(chunk, np.float32).reshape(-1) async for chunk in chunks]

    def again(loss: AudioLost) -> None:
        log.warning("voice %s: its freeze runs again from its start: %s", request.voice, loss)

    clip, rest = await opened(whole, again)
    await rest.aclose()
    return clip or []


def reference_of(frozen: FrozenPrompt, rate: int) -> ReferenceAudio:
    """The frozen clip decoded to `rate` (see `clips.clip_rate`) as a ReferenceAudio keyed by its bytes'
    hash (generated audio: no upload checks). Blocking: call it off the event loop."""
    samples = decode_audio(frozen.wav, rate)
    return ReferenceAudio(samples, rate, content_hash(frozen.wav), frozen.transcript)
