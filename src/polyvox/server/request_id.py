"""Each HTTP request's id, as vLLM keeps it: the client's `X-Request-ID` when it is a plain token
(`VALID_REQUEST_ID`: 1 to 128 ASCII letters, digits and `_.:-`), else a fresh one. It is set for the
logs (`logs.http_request_id_var`, so every line the request causes names it), on its trace span
(`otel_traces`) and echoed in the answer's `X-Request-Id`, errors included.

An id is checked, not trusted: it reaches log lines and response headers, so one with spaces, control
characters or no bound on its length is replaced rather than copied there. It names the request in
logs only: the back end keys its work by ids of its own, so two clients sending the same id cannot mix
their requests."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.runtime import otel
from polyvox.runtime.logs import http_request_id_var

HEADER = "x-request-id"
VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def request_id_for(scope: Scope) -> str:
    """The client's id when it is valid, else a fresh one."""
    offered = Headers(scope=scope).get(HEADER)
    if offered is not None and VALID_REQUEST_ID.fullmatch(offered):
        return offered
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Gives every HTTP request its id (see the module docstring) and echoes it in the answer."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_for(scope)
        # Not reset afterwards: each request runs in a task of its own, and the 500 handler, which
        # answers outside this middleware, reads it to echo the id too.
        http_request_id_var.set(request_id)
        otel.annotate("polyvox.request_id", request_id)  # otel_traces: on the request's span

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                MutableHeaders(scope=message)[HEADER] = request_id  # replaces one a route set
            await send(message)

        await self.app(scope, receive, send_with_id)
