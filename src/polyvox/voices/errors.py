"""Exceptions of the voices layer; each names the request parameter at fault, and the server maps
each class to one HTTP status."""

from __future__ import annotations


class VoiceError(ValueError):
    """Base class: `param` names the field at fault, `code` is the machine-readable reason."""

    code = "invalid_voice"

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code


class VoiceNotFound(VoiceError):
    code = "voice_not_found"


class InvalidVoiceName(VoiceError):
    code = "invalid_voice_name"


class VoiceConflict(VoiceError):
    """The name belongs to a builtin voice, which cannot be replaced or deleted."""

    code = "voice_name_reserved"


class InvalidVoiceAudio(VoiceError):
    """A clip that does not decode, is too short, too long or silent."""

    code = "invalid_audio"


class VoiceTooLarge(InvalidVoiceAudio):
    code = "upload_too_large"


class VoiceUnsupported(VoiceError):
    """The voice exists but the serving back end cannot speak with it (e.g. a cloned voice, no cloning)."""

    code = "cloning_unsupported"


class VoiceStorageUnavailable(VoiceError):
    """The voices directory cannot be written."""

    code = "voice_storage_unavailable"


class ConsentNotFound(VoiceNotFound):
    code = "consent_not_found"


class ConsentInUse(VoiceConflict):
    """A consent recording that voices still cite cannot be deleted before them."""

    code = "consent_in_use"


def unknown_voice(name: str) -> VoiceNotFound:
    """The refusal of a speech request in a voice there is none of (or the caller may not use)."""
    return VoiceNotFound(f"unknown voice {name!r}; GET /v1/audio/voices lists the voices", param="voice")


def uncitable_consent(consent_id: str) -> VoiceError:
    """The refusal of a new voice that cites a consent recording there is none of (or the caller may not
    use)."""
    return VoiceError(
        f"consent: no consent recording {consent_id!r}; upload one with POST /v1/audio/voice_consents and "
        "pass its id",
        param="consent",
        code="consent_not_found",
    )
