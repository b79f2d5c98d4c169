"""Every error the server answers, in OpenAI's shape `{"error": {"message", "type", "param", "code"}}`.

Backend exceptions, FastAPI validation errors and Starlette's HTTP errors are translated here, once;
so is a client that leaves before its body is read (`ClientDisconnect`: status 499, nginx's "client
closed request", one log line, never a server error) or that sends it too slowly (`BodyReadTimeout`:
408, connection closed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import Counter
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from polyvox.backends.errors import BackendError, BackendInputError, BackendOverloaded, EmptyInput
from polyvox.runtime.logs import current_request_id
from polyvox.server.allowed_methods import allowed_methods

log = logging.getLogger(__name__)

# Fields OpenAI defines answer 400 as OpenAI does; polyvox/uttera-tts-vllm extensions answer 422 as
# uttera-tts-vllm (a FastAPI app) does for them (e.g. cfg_value outside 0.5-5.0).
EXTENSION_FIELDS = frozenset(
    {"cfg_value", "inference_timesteps", "seed", "sample_rate", "cache", "temperature", "custom_voice_file"}
)

_FASTAPI_BODY_ERROR = "There was an error parsing the body"

CLIENT_CLOSED = 499  # nginx's "client closed request": nobody receives it, the metrics and logs do

_STATUS_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class APIError(Exception):
    """An HTTP error answered in OpenAI's shape."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.code = code
        self.type = type or error_type(status_code)
        self.headers = headers


class DeadlineExceeded(Exception):
    """A request ran past `settings.request_timeout_s` (504)."""

    def __init__(self, timeout_s: float):
        super().__init__(f"synthesis did not finish within the {timeout_s:g} s request deadline")


class BodyReadTimeout(Exception):
    """A request body still incomplete `timeout_s` after its headers arrived (408, connection closed);
    raised by `server.body_deadline` from the `receive` it wraps."""

    def __init__(self, timeout_s: float):
        super().__init__(
            f"request body not received within {timeout_s:g} s (request_read_timeout_s): connection closed"
        )
        self.timeout_s = timeout_s


def body_timeout_error(exc: BodyReadTimeout) -> APIError:
    """408 in OpenAI's shape, with `Connection: close`: the rest of the body is not waited for."""
    return APIError(408, str(exc), code="request_timeout", headers={"Connection": "close"})


def shutting_down_error(*, close: bool = False) -> APIError:
    """503 while the server drains: for a new request, and (`close`: the connection closed after it)
    for one whose body was still on its way when the drain began."""
    headers = {"Retry-After": "5", **({"Connection": "close"} if close else {})}
    return APIError(503, "the server is shutting down", code="shutting_down", headers=headers)


def error_type(status_code: int) -> str:
    if status_code >= 500:
        return "server_error"
    return _STATUS_TYPES.get(status_code, "invalid_request_error")


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(error: APIError) -> JSONResponse:
    return JSONResponse(
        error_body(error.message, error.type, error.param, error.code),
        status_code=error.status_code,
        headers=error.headers,
    )


def from_validation_errors(errors: Sequence[Any]) -> APIError:
    """The first pydantic/FastAPI validation error as an APIError naming its parameter."""
    first: dict[str, Any] = (
        dict(errors[0]) if errors else {"loc": (), "msg": "invalid request", "type": "value_error"}
    )
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "path", "header")]
    param = loc[0] if loc else None
    message = first.get("msg", "invalid request")
    kind = first.get("type", "")
    if param:
        message = f"{param}: {message}"
    if kind == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        return APIError(400, f"request body is not valid JSON: {detail}".strip(), code="invalid_json")
    if kind == "missing":
        return APIError(400, message, param=param, code="missing_required_parameter")
    status = 422 if param in EXTENSION_FIELDS else 400
    return APIError(status, message, param=param, code="invalid_value")


def from_backend_error(exc: Exception) -> APIError:
    if isinstance(exc, DeadlineExceeded):
        return APIError(504, str(exc), code="timeout")
    if isinstance(exc, EmptyInput):  # nothing to say: OpenAI's status for an empty `input`
        return APIError(400, exc.message, param=exc.param, code=exc.code)
    if isinstance(exc, BackendInputError):
        return APIError(422, exc.message, param=exc.param, code=exc.code)
    if isinstance(exc, BackendOverloaded):
        message = str(exc) or "the engine is overloaded"
        return APIError(429, message, code="rate_limit_exceeded", headers={"Retry-After": "1"})
    if isinstance(exc, BackendError):
        return APIError(500, f"synthesis failed: {exc}", code="engine_error")
    return APIError(500, "internal server error", code="internal_error")


def install_error_handlers(app: FastAPI, errors_total: Counter) -> None:
    """Route every exception the app can raise to an OpenAI-shaped JSON answer, each counted in
    `errors_total` (`polyvox_errors_total`, by error type)."""

    def count(request: Request, error: APIError) -> None:
        errors_total.labels(type=error.code or error.type).inc()

    async def on_api_error(request: Request, exc: APIError) -> JSONResponse:
        count(request, exc)
        return error_response(exc)

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = from_validation_errors(exc.errors())
        count(request, error)
        return error_response(error)

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        if isinstance(exc.__cause__, BodyReadTimeout):  # FastAPI wraps what reading a body raised in a 400
            return await on_body_timeout(request, exc.__cause__)
        if isinstance(exc.__cause__, ClientDisconnect):
            return await on_disconnect(request, exc.__cause__)
        if isinstance(exc.__cause__, APIError):  # a body read cut by the drain (`server.body_deadline`)
            return await on_api_error(request, exc.__cause__)
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and exc.detail == "Not Found":
            message = f"no route {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:
            # FastAPI's answer when parsing a body raised something other than a JSON syntax error
            # (a RecursionError from JSON nested past the parser's depth): the body is unusable JSON.
            message, code = "request body is not usable JSON (nested too deeply?)", "invalid_json"
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            allowed = ", ".join(allowed_methods(request.app.routes, request.url.path))
            headers = {**(headers or {}), "Allow": allowed}
        error = APIError(exc.status_code, message, code=code, headers=headers)
        count(request, error)
        return error_response(error)

    async def on_backend_error(request: Request, exc: Exception) -> JSONResponse:
        error = from_backend_error(exc)
        if error.status_code >= 500:
            log.error("back-end failure on %s: %s", request.url.path, exc)
        count(request, error)
        return error_response(error)

    async def on_disconnect(request: Request, exc: ClientDisconnect) -> Response:
        # The client left (or its proxy did; or the server, shutting down, stopped waiting for it):
        # one line, no traceback, counted as 499 by the metrics middleware, not as an error answered.
        log.info(
            "connection closed before the whole request body arrived: %s %s", request.method, request.url.path
        )
        return Response(status_code=CLIENT_CLOSED)

    async def on_body_timeout(request: Request, exc: BodyReadTimeout) -> JSONResponse:
        log.info("%s %s: %s", request.method, request.url.path, exc)
        error = body_timeout_error(exc)
        count(request, error)
        return error_response(error)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        # Answered by Starlette's outermost middleware, outside the one that echoes the request id.
        request_id = current_request_id()
        headers = {"X-Request-Id": request_id} if request_id is not None else None
        error = APIError(500, "internal server error", code="internal_error", headers=headers)
        count(request, error)
        return error_response(error)

    # Starlette types every handler as taking `Exception`; each of these is registered for its own type.
    app.add_exception_handler(APIError, on_api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    app.add_exception_handler(BackendInputError, on_backend_error)
    app.add_exception_handler(BackendError, on_backend_error)
    app.add_exception_handler(DeadlineExceeded, on_backend_error)
    app.add_exception_handler(ClientDisconnect, on_disconnect)  # type: ignore[arg-type]
    app.add_exception_handler(BodyReadTimeout, on_body_timeout)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, on_unexpected)


def keys_unavailable(problem: str) -> APIError:
    """503 `key_store_unavailable`: the key store cannot vouch for the named keys, so none is accepted (a
    store's failure fails closed)."""
    return APIError(
        503,
        f"API keys cannot be checked: {problem}",
        code="key_store_unavailable",
        headers={"Retry-After": "1"},
    )
