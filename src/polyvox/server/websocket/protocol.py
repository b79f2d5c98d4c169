"""The `/v1/audio/speech/ws` message schema: the session's config message, client-message errors,
and the JSON frames the server sends (errors included), as docs/streaming.md describes them."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.server.errors import APIError, DeadlineExceeded, error_body, from_backend_error
from polyvox.server.protocol import Number
from polyvox.server.speech.parsing import decode_json
from polyvox.server.voice_routes.errors import voice_api_error
from polyvox.voices.errors import VoiceError

log = logging.getLogger(__name__)


class SessionConfig(BaseModel):
    """The first message. Every field but `audio_encoding` means what it means on `/v1/audio/speech`."""

    type: Literal["config"]
    model: str = "tts-1"
    voice: str | dict = "alloy"
    instructions: str | None = None
    emotion: str | None = None  # checked as the speech request checks it
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "pcm"
    # numbers as JSON numbers (an integer for a float is fine), never `true` or "1.5"
    speed: Annotated[float, Number] = 1.0
    pitch: Annotated[float, Number] = 0.0
    sample_rate: Annotated[int | None, Number] = None
    seed: Annotated[int | None, Number] = None
    cfg_value: Annotated[float | None, Number] = None
    inference_timesteps: Annotated[int | None, Number] = None
    normalize: bool | None = None
    cache: bool = True
    ref_audio: str | None = None
    ref_text: str | None = None
    audio_encoding: Literal["binary", "base64"] = "binary"
    # `segment.words` events: each segment's words (and pieces, with "segment") on the session's clock
    timestamp_granularities: list[Literal["word", "segment"]] | None = None


class ProtocolError(Exception):
    """A client message the session cannot use (answered with an error message; the session goes on)."""

    def __init__(self, message: str, code: str = "invalid_message", param: str | None = None):
        super().__init__(message)
        self.error = APIError(400, message, code=code, param=param)

    @classmethod
    def of(cls, error: APIError) -> ProtocolError:
        problem = cls(error.message)
        problem.error = error
        return problem


def parse_message(message: Mapping[str, Any]) -> tuple[str | None, Any]:
    """A received message as (its `type`, its decoded JSON); ProtocolError if it is not JSON text."""
    if message.get("text") is None:
        raise ProtocolError("send JSON text messages; binary frames carry only server audio")
    try:
        data = decode_json(message["text"], "message")
    except APIError as exc:
        raise ProtocolError.of(exc) from exc
    return (data.get("type") if isinstance(data, dict) else None), data


def encode_frame(payload: dict[str, Any]) -> str:
    """A server message as compact JSON text."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def error_frame(error: APIError, segment: int | None = None) -> dict[str, Any]:
    """An `error` message: OpenAI's error body, with the segment it ended when there is one."""
    payload: dict[str, Any] = {"type": "error"}
    if segment is not None:
        payload["segment"] = segment
    payload.update(error_body(error.message, error.type, error.param, error.code))
    return payload


def as_api_error(exc: BaseException) -> APIError:
    """The error a session reports for `exc` (an unexpected one is logged and reported as internal)."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, VoiceError):
        return voice_api_error(exc)
    if isinstance(exc, BackendError | BackendInputError | DeadlineExceeded):
        return from_backend_error(exc)
    log.error("speech segment failed", exc_info=exc)
    return APIError(500, "internal server error", code="internal_error")
