"""A voice error (`polyvox.voices.errors`) as the API answers it: its HTTP status and OpenAI's error
shape, for the voice routes and the speech paths alike."""

from __future__ import annotations

from polyvox.server.errors import APIError
from polyvox.voices.errors import (
    InvalidVoiceAudio,
    InvalidVoiceName,
    VoiceConflict,
    VoiceError,
    VoiceNotFound,
    VoiceStorageUnavailable,
    VoiceTooLarge,
    VoiceUnsupported,
)

# Most specific class first.
_STATUS: tuple[tuple[type[VoiceError], int], ...] = (
    (VoiceNotFound, 404),
    (VoiceConflict, 409),
    (VoiceTooLarge, 413),
    (VoiceUnsupported, 422),
    (VoiceStorageUnavailable, 503),
    (InvalidVoiceName, 400),
    (InvalidVoiceAudio, 400),
    (VoiceError, 400),
)


def voice_api_error(exc: VoiceError) -> APIError:
    status = next(code for cls, code in _STATUS if isinstance(exc, cls))
    return APIError(status, exc.message, param=exc.param, code=exc.code)
