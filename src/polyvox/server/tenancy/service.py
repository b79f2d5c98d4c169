"""`Tenancy`: what the server does per key around a speech request: its limits checked and counted
before it runs (`charge`, `open_stream`), its usage recorded when it ends (`record`), and the
per-key counters on /metrics. `create_app` makes one; the speech routes and auth reach it through
`AppState.tenancy`."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from polyvox.server.errors import APIError
from polyvox.server.tenancy.caller import Caller
from polyvox.server.tenancy.key_metrics import KeyMetrics
from polyvox.server.tenancy.key_store import open_key_store
from polyvox.server.tenancy.key_table import KeyTable
from polyvox.server.tenancy.limits import Limiter, RateLimited, StreamLease, window_headers
from polyvox.server.tenancy.usage import USAGE_FILE, SqliteUsage, UsageRow, UsageStore, day_of
from polyvox.server.tenancy.usage_writer import UsageWriter
from polyvox.settings import Settings
from polyvox.voices.store import default_voices_dir

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from polyvox.state.connection import StateConnection


@dataclass
class Tenancy:
    keys: KeyTable
    limiter: Limiter
    usage: UsageStore
    metrics: KeyMetrics
    writer: UsageWriter  # usage written off the request path

    @classmethod
    def build(
        cls,
        settings: Settings,
        registry: CollectorRegistry,
        shared: StateConnection | None,
        require_api_key: bool = False,
        settings_keys: bool = False,
    ) -> Tenancy:
        """`settings_keys`: the settings name keys of their own; with those, or `require_api_key`, or a
        key table in the store, the server requires keys (`KeyTable.at_start`)."""
        usage, metrics = open_usage_store(settings, shared), KeyMetrics(registry)
        return cls(
            KeyTable.at_start(open_key_store(settings), require_api_key, settings_keys),
            Limiter(shared),
            usage,
            metrics,
            UsageWriter(usage, metrics.dropped),
        )

    async def charge(self, caller: Caller, characters: int) -> dict[str, str]:
        """Count a request of `characters` input characters against the caller's per-minute limits:
        its `x-ratelimit-*` headers, or a 429 `rate_limit_exceeded` saying which limit it is over."""
        if caller.key is None:
            return {}
        try:
            window = await self.limiter.charge(caller.key.id, caller.limits, characters)
        except RateLimited as exc:
            self.metrics.limited(caller.name, exc.which)
            raise _too_many(exc) from exc
        return {} if window is None else window_headers(caller.limits, window)

    async def open_stream(self, caller: Caller) -> StreamLease | None:
        """A stream (a speech request or a WebSocket session) opened by the caller; 429 past its
        `max_streams`."""
        if caller.key is None:
            return None
        try:
            return await self.limiter.open_stream(caller.key.id, caller.limits)
        except RateLimited as exc:
            self.metrics.limited(caller.name, exc.which)
            raise _too_many(exc) from exc

    async def close_stream(self, lease: StreamLease | None) -> None:
        if lease is not None:
            await self.limiter.close_stream(lease)

    async def record(
        self, caller: Caller, model: str, characters: int, audio_seconds: float, cache_hit: bool
    ) -> None:
        """One request done: into the usage rows (waiting at most `usage_writer.WAIT_S`) and the per-key
        counters."""
        row = UsageRow(
            caller.name,
            model,
            day_of(time.time()),
            requests=1,
            input_characters=characters,
            audio_seconds=audio_seconds,
            cache_hits=int(cache_hit),
        )
        self.metrics.record(row)
        await anyio.to_thread.run_sync(self.writer.add, row)


def open_usage_store(settings: Settings, connection: StateConnection | None = None) -> UsageStore:
    """Redis' when `state_url` is set (every replica adds to it; through the replica's `connection`,
    its timeouts and its health, when given), else the voices directory's file."""
    if settings.state_url:
        from polyvox.server.tenancy.redis_usage import RedisUsage

        return RedisUsage(connection) if connection is not None else RedisUsage.from_url(settings.state_url)
    root = settings.voices_dir or default_voices_dir()
    root.mkdir(parents=True, exist_ok=True)
    return SqliteUsage(root / USAGE_FILE)


def _too_many(exc: RateLimited) -> APIError:
    return APIError(429, str(exc), code="rate_limit_exceeded", headers=exc.headers())
