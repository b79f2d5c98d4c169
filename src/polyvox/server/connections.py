"""How the server holds its clients' connections: uvicorn's configuration for `polyvox serve` and for
each API process (`uvicorn_config`), with an HTTP/1.1 protocol that puts a deadline on a request's head
and does not wait, at shutdown, for bodies still on their way.

uvicorn bounds an idle keep-alive connection (`timeout_keep_alive`, 5 s), but not the time a head takes
to arrive: a connection that sends part of its headers and stalls, or sends nothing, is held for ever
(Slowloris). `DeadlineProtocol` closes it `request_read_timeout_s` after it opened or after its next
head began, with a 408 when part of a head came, as nginx's `client_header_timeout` does in front of
an application server; the body's deadline is `server.body_deadline`'s. A head over 16 KiB
(`server.head_size`) is answered 431 in OpenAI's shape; the connection is then closed gently (what the
client still sends is read and dropped for up to `LINGER_S`, as nginx's lingering close does), so the
client reads the answer instead of a TCP reset. When the server shuts down (after the drain), a
request still sending its body will not be served: its connection is closed at once (its handler
sees a disconnect) instead of being cancelled, with a traceback and a 500, when uvicorn's own wait
runs out.

The protocol is uvicorn's h11 one even where httptools is installed: one implementation to bound and
test, and parsing a head costs nothing next to synthesising speech. WebSocket handshakes go to
`RefusingWebSocketProtocol`, uvicorn's own but for one thing: a handshake refused with an HTTP answer
(a 401 in OpenAI's shape) is a finished handshake, not an ERROR in the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from polyvox.server.errors import error_body
from polyvox.server.head_size import HeadMeter
from polyvox.settings import Settings

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_S = 5  # after the drain: how long uvicorn waits for connections before cancelling
LINGER_S = 2.0  # after a 431: how long the rest of the head is read and dropped before closing


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head is not complete in time, or
    whose body is still coming when the server shuts down."""

    head_timeout_s: ClassVar[float] = 30.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_begun = False  # some of the awaited head has arrived
        self._head_meter = HeadMeter()
        self._refused = False  # answered 431: what still comes is dropped until the connection closes
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self.conn.their_state is h11.IDLE and self._head_meter.too_large(data):
            self._refuse_head()
            return
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # still waiting for a whole head: the clock runs
            self._head_begun = True
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and cycle.more_body:
            self.transport.close()
            return
        super().shutdown()

    def _arm(self) -> None:
        if self._head_timer is None:  # armed once per head: a trickle of bytes does not restart it
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._head_begun = False

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_begun:
            log.info("request headers not received within %g s: 408, connection closed", self.head_timeout_s)
            self._send_408()
        else:  # a connection that never sent a byte is closed as an idle keep-alive one is
            log.debug("connection idle for %g s without a request: closed", self.head_timeout_s)
        self.transport.close()

    def _send_408(self) -> None:
        message = f"request headers not received within {self.head_timeout_s:g} s (request_read_timeout_s)"
        self._send_error(408, b"Request Timeout", message, "request_timeout")

    def _refuse_head(self) -> None:
        limit = self._head_meter.limit
        log.info("request head over %d bytes: 431, connection closed", limit)
        self._disarm()
        self._refused = True
        message = f"request line and headers exceed {limit // 1024} KiB"
        self._send_error(431, b"Request Header Fields Too Large", message, "headers_too_large")
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer, then our end closed; theirs is read until it closes
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    def _send_error(self, status: int, reason: bytes, message: str, code: str) -> None:
        body = json.dumps(error_body(message, "invalid_request_error", code=code)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        events = [
            h11.Response(status_code=status, headers=headers, reason=reason),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ]
        with contextlib.suppress(h11.LocalProtocolError):  # h11 refuses one in this state: close without
            self.transport.write(b"".join(self.conn.send(event) or b"" for event in events))


class RefusingWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol; once the app has refused a handshake with a whole HTTP answer (the
    ASGI denial response), the handshake is over: uvicorn's own logs every refusal as an ERROR, "ASGI
    callable returned without completing handshake"."""

    async def send(self, message: Any) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True


def deadline_protocol(timeout_s: float) -> type[DeadlineProtocol]:
    """`DeadlineProtocol` with its head deadline (uvicorn builds the protocol itself, from a class)."""

    class Bounded(DeadlineProtocol):
        head_timeout_s = timeout_s

    return Bounded


def uvicorn_config(app: Any, settings: Settings, log_config: dict[str, Any], **where: Any) -> uvicorn.Config:
    """The server's uvicorn configuration; `where` says where it listens (`host`, `port`), or nothing
    when it is handed its socket (an API process behind the launcher)."""
    return uvicorn.Config(
        app,
        log_level=settings.log_level,
        log_config=log_config,  # uvicorn's lines in polyvox's format
        http=deadline_protocol(settings.request_read_timeout_s),
        ws=RefusingWebSocketProtocol,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        **where,
    )
