"""The launcher's listening sockets: one per API process, all on the same port, joined by
`SO_REUSEPORT` so that the kernel spreads new connections over them (a hash of each connection's
addresses and ports picks the socket)."""

from __future__ import annotations

import socket

from polyvox.startup import StartupError

BACKLOG = 2048


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
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
