"""Which process holds which TCP connection, as the kernel says: the server side of every established
connection to a port (/proc/net/tcp and tcp6), matched by socket inode against each process's open
files. Nothing in the server is asked, so it reads the same with any server code.

A connection still in a listening socket's accept queue belongs to no process yet: it is not counted."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from helpers.raw_http import address, read_until_closed

ESTABLISHED = "01"


def connection_counts(pids: list[int], port: int, clients: set[int] | None = None) -> dict[int, int]:
    """How many established connections to local `port` each of `pids` holds (0 for one holding none,
    or gone); only those from the client ports `clients` if given."""
    inodes = _established_to(port, clients)
    counts: dict[int, int] = {}
    for pid in pids:
        counts[pid] = 0
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                counts[pid] += 1
    return counts


def owner_of(connection: socket.socket, pids: list[int], timeout_s: float = 60.0) -> int:
    """Which of `pids` accepted `connection` (a client's socket), once one has; TimeoutError if none
    has within `timeout_s`."""
    port, mine = connection.getpeername()[1], {connection.getsockname()[1]}
    deadline = time.monotonic() + timeout_s
    while not (holders := [pid for pid, n in connection_counts(pids, port, mine).items() if n]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no process of {pids} accepted the connection in {timeout_s:g} s")
        time.sleep(0.01)
    return holders[0]


def _established_to(port: int, clients: set[int] | None) -> set[str]:
    """Socket inodes of the established connections whose local port is `port` (and remote port one of
    `clients`)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for fields in (line.split() for line in lines):
            local, remote = (int(field.rsplit(":", 1)[1], 16) for field in fields[1:3])
            if local != port or fields[3] != ESTABLISHED or fields[9] == "0":
                continue
            if clients is None or remote in clients:
                inodes.add(fields[9])
    return inodes


def through(url: str, pid: int, pids: list[int], request: bytes) -> bytes:
    """`request` sent on a connection API process `pid` accepted (others are closed and tried again):
    the whole answer."""
    while True:
        with socket.create_connection(address(url)) as connection:
            if owner_of(connection, pids) != pid:
                continue
            connection.sendall(request)
            return read_until_closed(connection, 60)
