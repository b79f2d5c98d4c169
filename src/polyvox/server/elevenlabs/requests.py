"""ElevenLabs' text-to-speech request (the HTTP body, and a socket's context settings) read as a
polyvox `SpeechRequest`: `text` is the input, the path's `voice_id` a polyvox voice name (builtin or
stored), `voice_settings.speed` the speed, `seed` the seed, `apply_text_normalization` polyvox's
`normalize`; `model_id` names ElevenLabs' models and is not used (the server's back end speaks)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from polyvox.server.errors import APIError, from_validation_errors
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.parsing import decode_json


class VoiceSettings(BaseModel):
    """Of ElevenLabs' voice settings only `speed` has a polyvox meaning; the rest are accepted."""

    model_config = ConfigDict(extra="ignore")

    speed: float | None = Field(None, ge=0.25, le=4.0)


class TextToSpeechBody(BaseModel):
    """`POST /v1/text-to-speech/{voice_id}[...]`: the fields polyvox reads (others are ignored)."""

    model_config = ConfigDict(extra="ignore")

    text: str
    model_id: str | None = None
    voice_settings: VoiceSettings | None = None
    seed: int | None = Field(None, ge=0, le=4294967295)
    apply_text_normalization: Literal["auto", "on", "off"] | None = None
    language_code: str | None = None


def speech_fields(
    voice_id: str, voice_settings: VoiceSettings | None, normalization: str | None, seed: int | None = None
) -> dict[str, Any]:
    """The `SpeechRequest` fields ElevenLabs' settings stand for."""
    fields: dict[str, Any] = {"voice": voice_id}
    if voice_settings is not None and voice_settings.speed is not None:
        fields["speed"] = voice_settings.speed
    if normalization in ("on", "off"):
        fields["normalize"] = normalization == "on"
    if seed is not None:
        fields["seed"] = seed
    return fields


def speech_request(fields: dict[str, Any]) -> SpeechRequest:
    """A `SpeechRequest` of `fields`; 400 in OpenAI's shape naming the field at fault."""
    try:
        return SpeechRequest.model_validate(fields)
    except ValidationError as exc:
        raise from_validation_errors(exc.errors()) from exc


def read_body(raw: bytes) -> TextToSpeechBody:
    """The JSON body; 400 naming the field at fault."""
    data = decode_json(raw, "body")
    if not isinstance(data, dict):
        raise APIError(400, "the body must be a JSON object with `text`", param="text")
    try:
        return TextToSpeechBody.model_validate(data)
    except ValidationError as exc:
        raise from_validation_errors(exc.errors()) from exc
