"""Reads the body of a small management request (the voice and consent routes) into its fields: a JSON
object, or multipart/form-data (or urlencoded) with at most one file, as OpenAI's SDK sends either."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request

from polyvox.server.errors import APIError
from polyvox.server.speech.parsing import FORM_TYPES, JSON_TYPES, parse_json_object, read_form


async def read_fields(request: Request, max_bytes: int) -> Mapping[str, Any]:
    """The body's fields (an uploaded file as a starlette UploadFile); 413 past `max_bytes`, 415 for
    another content type, 400 for JSON that is not an object."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in FORM_TYPES:
        return await read_form(request, max_bytes)
    if content_type in JSON_TYPES or content_type.endswith("+json"):
        return parse_json_object(await _read_body(request, max_bytes))
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
