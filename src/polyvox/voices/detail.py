"""What the voice API shows about one voice: OpenAI's `audio.voice` object (`id`, `name`,
`created_at`, `type`, `prompt`) plus polyvox's fields. The registry builds it; the routes answer it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

# OpenAI's `created_at` for a builtin voice, which no one created at a time of its own: a fixed moment
# (polyvox's first commit), the same on every server, replica and restart.
BUILTIN_CREATED_AT = 1_795_999_839


class VoiceDetail(BaseModel):
    """One voice, as `GET/POST /v1/audio/voices[/{id}]` show it (and the voice lists name it)."""

    id: str
    object: Literal["audio.voice"] = "audio.voice"
    name: str
    created_at: int | None = None
    type: Literal["audio_sample", "prompt"] | None = None
    prompt: str | None = None
    consent_id: str | None = None
    source: str  # builtin, registered, uploaded, designed or adapter (a LoRA adapter)
    description: str | None = None
    transcript: str | None = None
    duration_s: float | None = None
    voice_prompt_hash: str | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    emotion: str | None = None  # the voice's default emotion
    consent: bool | None = None
    created: float | None = None

    @classmethod
    def of(cls, voice_id: str, source: str, *, label: str | None = None, **fields: Any) -> VoiceDetail:
        """The voice `voice_id` from `source`: its display name is its label, else its id (a builtin
        one capitalised); a designed voice is OpenAI's `prompt` type, others `audio_sample` unless
        `type` says (a builtin voice that is a voice design); a builtin one was created at
        `BUILTIN_CREATED_AT`."""
        name = label or (voice_id.capitalize() if source == "builtin" else voice_id)
        kind = fields.pop("type", None) or ("prompt" if source == "designed" else "audio_sample")
        created = fields.get("created")
        created_at = int(created) if created is not None else None
        if source == "builtin":
            created_at = BUILTIN_CREATED_AT
        return cls(id=voice_id, source=source, name=name, type=kind, created_at=created_at, **fields)
