"""`StreamLimitMiddleware`: a named key's `max_streams`, counted over the whole life of each speech
request (HTTP, streamed or whole, until its last byte is handed to the connection) and WebSocket
session, whatever way it ends; past the limit, 429 before routing (a WebSocket handshake gets it as its
HTTP answer). While a stream lives its lease in Redis is renewed, so one whose process died stops
counting within `limits.STREAM_LEASE_S`."""

from __future__ import annotations

import asyncio
import contextlib

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.server.errors import APIError, error_response
from polyvox.server.last_chunk import is_last_chunk
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.limits import STREAM_RENEW_S, StreamLease
from polyvox.server.tenancy.service import Tenancy

SPEECH_PREFIX = "/v1/audio/speech"


class StreamLimitMiddleware:
    def __init__(self, app: ASGIApp, tenancy: Tenancy):
        self.app = app
        self.tenancy = tenancy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(SPEECH_PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        tenancy = self.tenancy
        try:
            lease = await tenancy.open_stream(caller_of(HTTPConnection(scope)))
        except APIError as refusal:
            await error_response(refusal)(scope, receive, send)
            return
        if lease is None:
            await self.app(scope, receive, send)
            return
        stream = _Stream(tenancy, lease)
        renewing = asyncio.create_task(stream.renew())
        try:
            await self.app(scope, receive, stream.sending(send))
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            await stream.close()


class _Stream:
    """One counted stream: renewed while it lives, closed once (at its last byte, or when it ends)."""

    def __init__(self, tenancy: Tenancy, lease: StreamLease):
        self.tenancy = tenancy
        self.lease = lease
        self.closed = False

    async def renew(self) -> None:
        while True:
            await asyncio.sleep(STREAM_RENEW_S)
            await self.tenancy.limiter.renew_stream(self.lease)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.tenancy.close_stream(self.lease)

    def sending(self, send: Send) -> Send:
        async def counted(message: Message) -> None:
            if is_last_chunk(message):
                await self.close()  # before the last byte: the client's next request finds it free
            await send(message)

        return counted
