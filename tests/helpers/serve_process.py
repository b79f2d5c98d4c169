"""`polyvox serve` as a real child process on a free loopback port, for tests of the command itself.

Its output goes to a pipe (read it after the process ends): keep the server's logging modest
(`--log-level warning` under heavy load) so the pipe never fills.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

# Every port free_port has handed out in this process: the kernel may give a port it just gave (and
# that was closed again) to the next bind, and two ports asked for one after the other (a site's HTTP
# and HTTPS listeners, three replicas) must differ.
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, and never one this process was given before."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@contextmanager
def polyvox_serve(
    *flags: str, env: dict[str, str] | None = None, preexec=None, host: str = "127.0.0.1"
) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start `polyvox serve --host HOST --port FREE *flags`, wait for /ready, yield (process, URL);
    the process is killed on exit if it is still running."""
    port = free_port()
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--host", host, "--port", str(port), *flags]
    proc = subprocess.Popen(
        command,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=preexec,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"{url}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "polyvox serve never became ready"
            time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
