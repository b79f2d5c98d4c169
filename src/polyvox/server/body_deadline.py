"""The deadline on reading a request's body: whole within `request_read_timeout_s` of its headers, or
408 and the connection closed, so a client that stalls (or trickles a byte at a time) cannot hold a
connection, nor a drain at SIGTERM, for ever.

A pure ASGI middleware wrapping `receive`, so it bounds every way a body is read (JSON, multipart
uploads, a route's own streaming read) without buffering it; its headers' deadline is
`server.connections`' (the app sees a request only once they are in). While the body is incomplete,
each `receive` waits only until the deadline and then raises `BodyReadTimeout`, which `server.errors`
answers (408 with `Connection: close`); once the body is in, `receive` is passed through untouched
(a streaming answer listens on it for the client's disconnect for as long as it runs)."""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.server.errors import BodyReadTimeout, body_timeout_error, error_response


class BodyDeadlineMiddleware:
    def __init__(self, app: ASGIApp, timeout_s: float):
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self.timeout_s
        body_complete = False
        started = False

        async def receive_by_deadline() -> Message:
            nonlocal body_complete
            if body_complete:
                return await receive()
            try:
                # A message already there is returned even past the deadline (no wait, no timeout).
                async with asyncio.timeout(deadline - time.monotonic()):
                    message = await receive()
            except TimeoutError:
                raise BodyReadTimeout(self.timeout_s) from None
            body_complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive_by_deadline, send_tracked)
        except BodyReadTimeout as exc:
            # Escaped the app's handlers: a receive outside a route (a disconnect listener on a body
            # nobody read). Answer it here if nothing was sent; otherwise the cut connection says it.
            if not started:
                await error_response(body_timeout_error(exc))(scope, receive, send)
