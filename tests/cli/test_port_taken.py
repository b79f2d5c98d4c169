"""`polyvox serve` on a port another process already listens on: one last line says the port is taken
and what chooses another (`--port`, POLYVOX_PORT), before anything loads; no "serving ... on" line for
a server that never served, no engine said to have failed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def serve_on(port: int, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"}
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), *flags]
    command += ["--voices-dir", str(tmp_path / "voices"), "--cache-dir", str(tmp_path / "cache")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flags", [(), ("--api-server-count", "2")], ids=["one-process", "two-processes"])
def test_a_taken_port_is_one_last_line_naming_the_port_and_the_flag(
    taken_port: int, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    result = serve_on(taken_port, tmp_path, *flags)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"polyvox serve: port {taken_port} on 127.0.0.1 is already in use"), last
    assert "--port" in last and "POLYVOX_PORT" in last
    assert "engine failed" not in result.stderr and "Errno 98" not in result.stderr
    assert f"on http://127.0.0.1:{taken_port}" not in result.stderr  # it never served there
