"""The deadline on reading a request's body: whole within `request_read_timeout_s` of its headers, or
408 and the connection closed, so a client that stalls (or trickles a byte at a time) cannot hold a
connection, nor a drain at SIGTERM, for ever.

A pure ASGI middleware wrapping `receive`, so it bounds every way a body is read (JSON, multipart
uploads, a route's own streaming read) without buffering it; its headers' deadline is
`server.connections`' (the app sees a request only once they are in). While the body is incomplete,
each `receive` waits only until the deadline and then raises `BodyReadTimeout`, which `server.errors`
answers (408 with `Connection: close`); once the body is in, `receive` is passed through untouched
(a streaming answer listens on it for the client's disconnect for as long as it runs).

A drain cuts a body still on its way at once (`Lifecycle.bodies_cut`): its request is answered 503
`shutting_down` with `Connection: close`, as a new one would be, and no longer holds the drain."""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.server.errors import (
    APIError,
    BodyReadTimeout,
    body_timeout_error,
    error_response,
    shutting_down_error,
)
from polyvox.server.lifecycle.draining import Lifecycle


async def _until_cut(receive: Receive, cut: asyncio.Event) -> Message:
    """The next message, unless `cut` is set first (APIError 503); a message already there wins."""
    receiving = asyncio.ensure_future(receive())
    cutting = asyncio.ensure_future(cut.wait())
    try:
        await asyncio.wait((receiving, cutting), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (receiving, cutting):
            if not task.done():
                task.cancel()
    if receiving.done():
        return receiving.result()
    raise shutting_down_error(close=True)


class BodyDeadlineMiddleware:
    def __init__(self, app: ASGIApp, timeout_s: float, lifecycle: Lifecycle):
        self.app = app
        self.timeout_s = timeout_s
        self.lifecycle = lifecycle

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
                    message = await _until_cut(receive, self.lifecycle.bodies_cut)
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
        except (BodyReadTimeout, APIError) as exc:
            # Escaped the app's handlers: a receive outside a route (a disconnect listener on a body
            # nobody read). Answer it here if nothing was sent; otherwise the cut connection says it.
            if not started:
                error = body_timeout_error(exc) if isinstance(exc, BodyReadTimeout) else exc
                await error_response(error)(scope, receive, send)
