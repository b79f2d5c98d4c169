"""The connection to the shared-state Redis and its health: every Redis call goes through `call` (a
blocking client, for threads) or `acall` (an asyncio client, for the event loop), which count
failures, log each change between reachable and unreachable once, and while Redis is unreachable
fail at once (no timeout per request) until `check` finds it back.

A Redis that stops answering (frozen, overloaded, a network partition) costs a call at most
`CONNECT_TIMEOUT_S` to connect and `CALL_TIMEOUT_S` per reply awaited, never retried on a timeout:
the first call that times out marks it unreachable, and the calls after it fail at once."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import redis
import redis.asyncio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from polyvox.runtime.metrics_files import shared_counter, shared_metrics_dir
from polyvox.state.state_format import StateFormatError, ensure_format

log = logging.getLogger(__name__)

T = TypeVar("T")
CONNECT_TIMEOUT_S = 0.5
CALL_TIMEOUT_S = 0.5
STATE_ERRORS = "polyvox_state_errors"
STATE_ERRORS_HELP = "Shared-state operations that failed, or were skipped while the store was unreachable."


class StateUnavailable(Exception):
    """The shared state cannot be reached now; `str()` says where and why."""


class StateConnection:
    """One Redis client for the replica's shared state, with a reachable/unreachable flag; and, between
    `open_async` and `aclose` (the server's lifespan), an asyncio client for calls from its event loop."""

    def __init__(self, url: str, client: redis.Redis | None = None):
        self.url = url
        self.client = client or redis.Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CALL_TIMEOUT_S
        )
        self._async_client: redis.asyncio.Redis | None = None
        kwargs = self.client.connection_pool.connection_kwargs
        # Shown in logs and errors without the password the URL may carry.
        self.where = f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
        self.available = False
        self.reason = "not contacted yet"
        self.format_error: str | None = None  # the state it holds is in a format this polyvox cannot read
        self.failures: Counter[str] = Counter()
        # Several API processes on one port each have a connection: /metrics sums their shared counts.
        self._shared_failures = shared_counter(STATE_ERRORS, STATE_ERRORS_HELP, ["operation"])
        self._lock = threading.Lock()
        self._announced = False

    def call(self, operation: str, fn: Callable[[redis.Redis], T]) -> T:
        """`fn(client)`; raises StateUnavailable (and counts it under `operation`) when Redis is
        known to be unreachable or the call fails."""
        if not self.available:
            self._failed(operation)
            raise StateUnavailable(self.describe())
        try:
            return fn(self.client)
        except redis.RedisError as exc:
            self._failed(operation)
            self._went_down(exc)
            raise StateUnavailable(self.describe()) from exc

    def open_async(self) -> None:
        """Make the asyncio client, on the event loop that will use it (its connections belong to it)."""
        self._async_client = redis.asyncio.Redis.from_url(
            self.url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=CALL_TIMEOUT_S,
            # Unlike the blocking client's pool, the asyncio one hands out a connection Redis closed
            # (a restart) as it is: one retry on a fresh connection, or a restart reads as an outage.
            # Not on a timeout: a Redis that does not answer would cost every call twice the timeout.
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        )

    async def aclose(self) -> None:
        client, self._async_client = self._async_client, None
        if client is not None:
            await client.aclose()

    async def acall(self, operation: str, fn: Callable[[redis.asyncio.Redis], Awaitable[T]]) -> T:
        """`call` on the event loop: `await fn(client)` with the asyncio client."""
        client = self._async_client
        if not self.available or client is None:
            self._failed(operation)
            raise StateUnavailable(self.describe())
        try:
            return await fn(client)
        except redis.RedisError as exc:
            self._failed(operation)
            self._went_down(exc)
            raise StateUnavailable(self.describe()) from exc

    def check(self) -> bool:
        """Ping Redis (even while it is known to be down: this is what finds it back), and as it is found
        (back) check the format of the state it holds (`state_format`): in a format this polyvox cannot
        read, it is taken as down, `format_error` saying why."""
        try:
            self.client.ping()
            if not self.available:
                ensure_format(self.client, self.where)
        except redis.RedisError as exc:
            self._failed("ping")
            self._went_down(exc)
            return False
        except StateFormatError as exc:
            self._failed("format")
            if self.format_error != str(exc):
                log.error("%s", exc)
            self.format_error = str(exc)
            self._went_down(exc, announce=False)
            return False
        with self._lock:
            self.format_error = None
            came_back = not self.available
            self.available = True
            self.reason = ""
        if came_back:
            log.info(
                "shared state %s %s: resynchronising",
                self.where,
                "reachable again" if self._announced else "reachable",
            )
            self._announced = True
        return True

    def _failed(self, operation: str) -> None:
        self.failures[operation] += 1
        if self._shared_failures is not None:
            self._shared_failures.labels(operation=operation).inc()

    def describe(self) -> str:
        if self.format_error is not None:
            return f"the shared state store {self.where} cannot be used: {self.format_error}"
        return f"the shared state store {self.where} is unreachable ({self.reason})"

    def close(self) -> None:
        self.client.close()

    def _went_down(self, exc: Exception, announce: bool = True) -> None:
        with self._lock:
            was_up = self.available or not self._announced
            self.available = False
            self.reason = f"{type(exc).__name__}: {exc}"
            self._announced = True
        if was_up and announce:
            log.warning(
                "%s: synthesis goes on without the shared audio cache, voices and the lexicon are "
                "served from this replica's copies, and changes to them are refused until it returns",
                self.describe(),
            )


class StateCollector(Collector):
    """`polyvox_state_up` and `polyvox_state_errors_total{operation}` at scrape time; with several API
    processes on one port, up as the scraping process sees it and the errors left to the shared files."""

    def __init__(self, connection: StateConnection):
        self.connection = connection
        self.reports_errors = shared_metrics_dir() is None

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "polyvox_state_up",
            "1 while the shared state store (state_url) is reachable, else 0.",
            value=1.0 if self.connection.available else 0.0,
        )
        if not self.reports_errors:
            return
        errors = CounterMetricFamily(STATE_ERRORS, STATE_ERRORS_HELP, labels=["operation"])
        for operation, count in sorted(self.connection.failures.items()):
            errors.add_metric([operation], count)
        yield errors
