"""A private redis-server for the shared-state tests (skipped, saying why, where none is installed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.redis_server import RedisServer, private_redis


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with private_redis() as server:
        yield server
