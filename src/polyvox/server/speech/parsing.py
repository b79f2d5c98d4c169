"""Reads a speech request body, JSON or multipart/form-data (as uttera-tts-vllm accepted), into a
`SpeechRequest` plus an optional one-off clone reference (a multipart upload, or `ref_audio` in base64
or a data URL), checked like every voice clip; enforces the body size limit and answers 415 for any
other content type."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import sys
from typing import Any

import anyio
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from polyvox.backends.base import ReferenceAudio
from polyvox.server.errors import APIError
from polyvox.server.protocol import FORM, SpeechRequest
from polyvox.voices.clips import ClipLimits, load_clip

JSON_TYPES = ("application/json", "text/json")
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
UPLOAD_FIELDS = ("custom_voice_file", "speaker_wav", "voice_file")
_GRANULARITIES = ("timestamp_granularities", "timestamp_granularities[]")


def _too_large(limit: int) -> APIError:
    return APIError(413, f"request body exceeds {limit} bytes", code="request_too_large")


async def _read_body(request: Request, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _too_large(limit)
        parts.append(part)
    return b"".join(parts)


async def _reference(
    data: bytes, param: str, transcript: str | None, limits: ClipLimits, rate: int
) -> ReferenceAudio:
    """The clip checked (decodes, length, not silent; a VoiceError otherwise) and decoded to `rate` off
    the loop; a back end that refuses it names `param`, the field it came in."""
    clip = await anyio.to_thread.run_sync(load_clip, data, limits, rate, param, transcript)
    return dataclasses.replace(clip, field=param)


def _base64_audio(value: str) -> bytes:
    """`ref_audio`: plain base64 or a data URL (`data:audio/wav;base64,...`)."""
    if value.startswith("data:"):
        header, _, value = value.partition(",")
        if not header.endswith(";base64"):
            raise APIError(400, "ref_audio: a data URL must be base64-encoded", param="ref_audio")
    try:
        return base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise APIError(
            400, f"ref_audio is not valid base64: {exc}", param="ref_audio", code="invalid_audio"
        ) from exc


async def base64_reference(
    value: str, transcript: str | None, limits: ClipLimits, rate: int
) -> ReferenceAudio:
    """A one-off clone reference sent as base64 or a data URL (`ref_audio`), checked and decoded to
    `rate` (see `voices.clips.clip_rate`)."""
    return await _reference(_base64_audio(value), "ref_audio", transcript, limits, rate)


def _replay(body: bytes):
    """An ASGI `receive` that hands over an already-read body once."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.request", "body": b"", "more_body": False}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def read_form(request: Request, max_bytes: int, max_files: int = 1, max_fields: int = 32) -> FormData:
    """A multipart/form-data (or urlencoded) body read under the `max_bytes` limit; 415 otherwise."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in FORM_TYPES:
        raise APIError(
            415,
            f"unsupported Content-Type {content_type!r}; send multipart/form-data",
            code="unsupported_media_type",
        )
    raw = await _read_body(request, max_bytes)
    return await Request(request.scope, _replay(raw)).form(max_files=max_files, max_fields=max_fields)


def decode_json(raw: bytes | str, what: str = "request body") -> Any:
    """JSON text decoded; anything the parser refuses, however malformed, deeply nested or long its
    numbers, is a 400 `invalid_json` naming `what` (the parser recurses per level: nesting past its
    limit is refused, not a 500; an integer past Python's 4,300 digits is refused as well)."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"{what} is not valid JSON: {exc}", code="invalid_json") from exc
    except RecursionError as exc:
        raise APIError(400, f"{what} is nested too deeply", code="invalid_json") from exc
    except ValueError as exc:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        message = f"{what} holds a number of more than {sys.get_int_max_str_digits()} digits"
        raise APIError(400, message, code="invalid_json") from exc


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A JSON body that must be an object; anything else is a 400 `invalid_json` (`decode_json`)."""
    parsed = decode_json(raw)
    if not isinstance(parsed, dict):
        raise APIError(400, "request body must be a JSON object", code="invalid_json")
    return parsed


async def read_speech_request(
    request: Request,
    max_bytes: int,
    defaults: dict[str, Any] | None = None,
    *,
    clip_rate: int,
    max_upload_bytes: int | None = None,
    clip_limits: ClipLimits | None = None,
) -> tuple[SpeechRequest, ReferenceAudio | None]:
    """Parse and validate the body; validation errors become RequestValidationError (translated once).
    A reference clip is decoded to `clip_rate` (the served back end's: see `voices.clips.clip_rate`).

    The body limit holds for chunked bodies too (no Content-Length): reading stops past `max_bytes`.
    The fields are validated before a reference clip is decoded, so a bad field costs no decoding."""
    limits = clip_limits or ClipLimits(max_bytes=max_upload_bytes or ClipLimits.max_bytes)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    data: dict[str, Any] = dict(defaults or {})
    upload: UploadFile | None = None
    upload_param = ""
    if content_type in JSON_TYPES or content_type.endswith("+json") or not content_type:
        data.update(parse_json_object(await _read_body(request, max_bytes)))
    elif content_type in FORM_TYPES:
        raw = await _read_body(request, max_bytes)
        form = await Request(request.scope, _replay(raw)).form(max_files=2, max_fields=64)
        uploads = {name: value for name in UPLOAD_FIELDS if isinstance(value := form.get(name), UploadFile)}
        upload_param = next(iter(uploads), "")
        if upload_param:
            upload = uploads[upload_param]
            if max_upload_bytes is not None and (upload.size or 0) > max_upload_bytes:
                raise APIError(
                    413,
                    f"the uploaded reference audio exceeds {max_upload_bytes} bytes",
                    param=upload_param,
                    code="upload_too_large",
                )
        data.update({key: value for key, value in form.items() if not isinstance(value, UploadFile)})
        # a list field, sent as repeated fields (OpenAI's clients name them `timestamp_granularities[]`)
        listed = [v for k in _GRANULARITIES for v in form.getlist(k) if isinstance(v, str)]
        if listed:
            data.pop(_GRANULARITIES[1], None)
            data[_GRANULARITIES[0]] = ",".join(listed)
    else:
        raise APIError(
            415,
            f"unsupported Content-Type {content_type!r}; send application/json or multipart/form-data",
            code="unsupported_media_type",
        )
    try:  # a form's fields are text, parsed as numbers; JSON's numbers must be numbers
        body = SpeechRequest.model_validate(data, context=FORM if content_type in FORM_TYPES else None)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc
    reference = None
    if upload is not None:
        reference = await _reference(await upload.read(), upload_param, body.ref_text, limits, clip_rate)
    elif body.ref_audio is not None:
        reference = await _reference(
            _base64_audio(body.ref_audio), "ref_audio", body.ref_text, limits, clip_rate
        )
    if body.ref_audio is not None:
        body = body.model_copy(update={"ref_audio": None})
    return body, reference
