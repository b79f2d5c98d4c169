"""The server's listening sockets, bound before anything loads so that a port already taken is one line
naming the flag that chooses another: the one socket of `polyvox serve`, or the launcher's, one per API
process, all on the same port, joined by `SO_REUSEPORT` so that the kernel spreads new connections over
them (a hash of each connection's addresses and ports picks the socket)."""

from __future__ import annotations

import errno
import socket

from polyvox.runtime.startup import StartupError

BACKLOG = 2048


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (port 0 picks a free one), not yet listening: uvicorn listens on
    it once the app has started, so a client meanwhile is refused as before. StartupError when the
    port cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own sockets do
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise cannot_listen(host, port, exc) from exc
    return sock


def cannot_listen(host: str, port: int, exc: OSError) -> StartupError:
    """Why `host`:`port` cannot be listened on, and what chooses another."""
    if exc.errno == errno.EADDRINUSE:
        return StartupError(
            f"port {port} on {host} is already in use (another server listens there): "
            "choose another with --port N or POLYVOX_PORT (make serve PORT=N)"
        )
    return StartupError(
        f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
        "choose the address with --host and --port (POLYVOX_HOST, POLYVOX_PORT)"
    )


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one port (port 0 picks a free one); StartupError when the port
    cannot be had (in use, no such host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        # A plain bind first: it fails where anything listens on the port, a second launcher's sockets
        # included, which a bind with SO_REUSEPORT would join instead.
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the listeners do
            probe.bind((host, port))
            port = probe.getsockname()[1]
        return [
            socket.create_server((host, port), family=family, backlog=BACKLOG, reuse_port=True)
            for _ in range(count)
        ]
    except OSError as exc:
        raise cannot_listen(host, port, exc) from exc
