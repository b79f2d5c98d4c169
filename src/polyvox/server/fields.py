"""Reads the body of a small management request (the voice and consent routes) into its fields: a JSON
object, or multipart/form-data (or urlencoded) with at most one file, as OpenAI's SDK sends either."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from polyvox.server.errors import APIError
from polyvox.server.parsing import FORM_TYPES, JSON_TYPES, read_form


async def read_fields(request: Request, max_bytes: int) -> Mapping[str, Any]:
    """The body's fields (an uploaded file as a starlette UploadFile); 413 past `max_bytes`, 415 for
    another content type, 400 for JSON that is not an object."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in FORM_TYPES:
        return await read_form(request, max_bytes)
    if content_type in JSON_TYPES or content_type.endswith("+json"):
        return _json_object(await _read_body(request, max_bytes))
    raise APIError(
        415,
        f"unsupported Content-Type {content_type!r}; send multipart/form-data or application/json",
        code="unsupported_media_type",
    )


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"request body exceeds {limit} bytes", code="request_too_large")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise APIError(413, f"request body exceeds {limit} bytes", code="request_too_large")
    return bytes(body)


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    except RecursionError as exc:  # the parser recurses per nesting level
        raise APIError(400, "request body is nested too deeply", code="invalid_json") from exc
    if not isinstance(parsed, dict):
        raise APIError(400, "request body must be a JSON object", code="invalid_json")
    return parsed
