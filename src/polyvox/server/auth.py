"""`AuthMiddleware`: every HTTP request and WebSocket handshake is authorized before routing (by the
`Authorizer` of `tenancy/authorization.py`, which says who may use which path), so every route, including
ones added later, is guarded; a refusal is answered in OpenAI's error shape and counted, and the caller
found (`tenancy.caller.Caller`) is left in the request's scope for the routes."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from polyvox.server.errors import APIError, error_response
from polyvox.server.metrics import Metrics
from polyvox.server.tenancy.authorization import Authorizer
from polyvox.server.tenancy.caller import remember


class AuthMiddleware:
    """Runs `authorizer.authorize` on every HTTP request and WebSocket handshake before routing, answering a
    refusal in OpenAI's error shape (a WebSocket gets it as the handshake's HTTP answer)."""

    def __init__(self, app: ASGIApp, authorizer: Authorizer, metrics: Metrics):
        self.app = app
        self.authorizer = authorizer
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            try:
                remember(scope, await self.authorizer.authorize(HTTPConnection(scope)))
            except APIError as refusal:
                self.metrics.errors.labels(type=refusal.code or refusal.type).inc()
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
