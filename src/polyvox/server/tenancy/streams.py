"""`StreamLimitMiddleware`: a named key's `max_streams`, counted over the whole life of each speech
request (HTTP, streamed or whole, until its last byte is sent) and WebSocket session, whatever way it
ends; past the limit, 429 before routing (a WebSocket handshake gets it as its HTTP answer)."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from polyvox.server.app_state import app_state
from polyvox.server.errors import APIError, error_response
from polyvox.server.tenancy.caller import caller_of

SPEECH_PREFIX = "/v1/audio/speech"


class StreamLimitMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(SPEECH_PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        tenancy = app_state(scope["app"]).tenancy
        try:
            lease = await tenancy.open_stream(caller_of(HTTPConnection(scope)))
        except APIError as refusal:
            await error_response(refusal)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            await tenancy.close_stream(lease)
