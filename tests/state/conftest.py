"""A private redis-server for the shared-state tests (skipped, saying why, where none is installed)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from helpers.redis_server import RedisServer


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    binary = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if binary is None:
        pytest.skip("redis-server not installed (Debian package redis-server; .ci/run installs it)")
    server = RedisServer(binary)
    server.start()
    try:
        yield server
    finally:
        server.close()
