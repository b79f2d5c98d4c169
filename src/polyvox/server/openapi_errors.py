"""The error answers the OpenAPI document declares: each operation lists the statuses it can answer
besides its success (401 and 403 wherever a key is needed, and those `OPERATIONS` names), all in
OpenAI's error shape (`OpenAIError`, the one `server.errors` answers with). FastAPI's own 422
"Validation Error" is dropped: a validation error is answered 400 (422 for polyvox's extension
fields), in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from polyvox.server.tenancy.authorization import OPEN_PATHS

SCHEMA_NAME = "OpenAIError"
ERROR_SCHEMA: dict[str, Any] = {
    "title": SCHEMA_NAME,
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "examples": ["invalid_request_error"]},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
MEANINGS = {
    400: "The request is invalid: a field's value, a missing field, a body that is not valid JSON.",
    401: "No API key, or an unknown one.",
    403: "The key lacks this route's scope (or is not an admin key).",
    404: "Not found: the voice, model, consent, key or entry named.",
    409: "A conflict: the name is taken, or another voice or key holds it.",
    413: "The body or its upload is over the server's limit.",
    415: "The Content-Type is not one this route reads.",
    422: "A polyvox extension field is out of range, or the engine cannot do what was asked.",
    429: "Over a rate limit or the server's queue; Retry-After says when to try again.",
    503: "The server is shutting down or its engine is not ready; Retry-After says when to try again.",
    504: "The request ran past its deadline.",
}
_SPEECH = (400, 404, 413, 415, 422, 429, 503, 504)
_UPLOAD = (400, 413, 415, 422, 503)
# Beyond 401/403: what each operation answers besides its success.
OPERATIONS: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/v1/audio/speech"): _SPEECH,
    ("post", "/v1/audio/speech/stream"): _SPEECH,
    ("get", "/v1/models/{model_id}"): (404,),
    ("get", "/v1/usage"): (400,),
    ("get", "/v1/audio/voices/{voice_id}"): (404,),
    ("post", "/v1/audio/voices"): (*_UPLOAD, 409, 429, 504),
    ("post", "/v1/audio/voices/{voice_id}"): (*_UPLOAD, 404, 409),
    ("delete", "/v1/audio/voices/{voice_id}"): (404,),
    ("post", "/v1/audio/voice_consents"): _UPLOAD,
    ("get", "/v1/audio/voice_consents/{consent_id}"): (404,),
    ("post", "/v1/audio/voice_consents/{consent_id}"): (*_UPLOAD, 404),
    ("delete", "/v1/audio/voice_consents/{consent_id}"): (404, 409),
    ("post", "/admin/keys"): (400, 409),
    ("delete", "/admin/keys/{key_id}"): (404,),
    ("get", "/admin/lexicon"): (404,),
    ("post", "/admin/lexicon"): (400, 404, 503),
    ("delete", "/admin/lexicon"): (404, 503),
    ("delete", "/admin/lexicon/{term}"): (404, 503),
    ("post", "/admin/lexicon/reload"): (400, 404, 503),
    ("post", "/admin/lora"): (400, 409, 503),
    ("delete", "/admin/lora/{name}"): (404,),
    ("post", "/admin/reload-voices"): (400, 503),
}


def _response(status: int) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{SCHEMA_NAME}"}
    return {
        "description": MEANINGS.get(status, "An error."),
        "content": {"application/json": {"schema": schema}},
    }


def declare_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an OpenAPI document) with every operation's error answers declared."""
    schema.setdefault("components", {}).setdefault("schemas", {})[SCHEMA_NAME] = ERROR_SCHEMA
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            if "HTTPValidationError" in str(responses.pop("422", "")):
                responses["400"] = _response(400)
            statuses = set(OPERATIONS.get((method, path), ()))
            if path not in OPEN_PATHS:
                statuses |= {401, 403}
            for status in sorted(statuses):
                responses[str(status)] = _response(status)
    return schema


def install(app: FastAPI) -> None:
    """Serve the OpenAPI document with the error answers declared."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = declare_errors(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
