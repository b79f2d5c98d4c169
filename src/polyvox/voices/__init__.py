"""Voice prompts: builtin voices (designed, then frozen into a reference clip on first use), voices
registered in a voices directory or uploaded through the API, and the checks every clip passes."""

from polyvox.voices.clips import ClipLimits, clip_rate, load_clip
from polyvox.voices.detail import VoiceDetail
from polyvox.voices.errors import (
    InvalidVoiceAudio,
    InvalidVoiceName,
    VoiceConflict,
    VoiceError,
    VoiceNotFound,
    VoiceStorageUnavailable,
    VoiceUnsupported,
)
from polyvox.voices.registry import ResolvedVoice, VoiceRegistry

__all__ = [
    "ClipLimits",
    "InvalidVoiceAudio",
    "InvalidVoiceName",
    "ResolvedVoice",
    "VoiceConflict",
    "VoiceError",
    "VoiceDetail",
    "VoiceNotFound",
    "VoiceRegistry",
    "VoiceStorageUnavailable",
    "VoiceUnsupported",
    "clip_rate",
    "load_clip",
]
