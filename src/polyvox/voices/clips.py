"""The checks every voice clip passes (registered, uploaded or sent with one request), and its
decoding into a `ReferenceAudio` keyed by the sha256 of its bytes, at the rate the back end takes
references at (`clip_rate`). Decoding is bounded (see `polyvox.audio.decode`): a clip over
`max_seconds` is refused as soon as that is known, never decoded to its end."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from polyvox.audio.decode import decode_audio
from polyvox.audio.errors import AudioDecodeError, AudioTooLong
from polyvox.backends.base import BackendInfo, ReferenceAudio
from polyvox.settings import Settings
from polyvox.voices.errors import InvalidVoiceAudio, VoiceTooLarge

SILENCE_RMS = 1e-3  # -60 dBFS


@dataclass(frozen=True)
class ClipLimits:
    min_seconds: float = 1.0
    max_seconds: float = 60.0
    max_bytes: int = 20_971_520

    @classmethod
    def from_settings(cls, settings: Settings) -> ClipLimits:
        return cls(settings.voice_min_seconds, settings.voice_max_seconds, settings.max_upload_bytes)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def clip_rate(info: BackendInfo) -> int:
    """The rate voice clips are decoded to for this back end: the rate it takes references at, so a
    clip is resampled once; a back end that cannot clone still has clips checked (a bad clip is a 400
    before the back end's refusal), decoded to its own output rate."""
    return info.reference_rate if info.reference_rate is not None else info.sample_rate


def load_clip(
    data: bytes, limits: ClipLimits, rate: int, param: str = "audio", transcript: str | None = None
) -> ReferenceAudio:
    """Decode a clip to `rate` and check it: at most `max_bytes`, decodable, finite,
    `min_seconds`..`max_seconds` long, not silent. Raises InvalidVoiceAudio (VoiceTooLarge for size)
    naming `param`. Blocking: call it off the event loop."""
    if len(data) > limits.max_bytes:
        raise VoiceTooLarge(f"{param}: the audio file exceeds {limits.max_bytes} bytes", param)
    try:
        samples = decode_audio(data, rate, limits.max_seconds)
    except AudioTooLong as exc:
        raise InvalidVoiceAudio(f"{param}: {exc}", param, "audio_too_long") from exc
    except AudioDecodeError as exc:  # not audio, not finite, or past another bound of decoding
        raise InvalidVoiceAudio(f"{param}: {exc}", param, "invalid_audio") from exc
    seconds = samples.size / rate
    if seconds < limits.min_seconds:
        raise InvalidVoiceAudio(
            f"{param}: the audio is {seconds:.2f} s long; at least {limits.min_seconds:g} s is needed",
            param,
            "audio_too_short",
        )
    if float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) < SILENCE_RMS:
        raise InvalidVoiceAudio(f"{param}: the audio is silent", param, "audio_silent")
    return ReferenceAudio(samples, rate, content_hash(data), transcript or None)
