"""Prometheus metrics, one registry per app (so tests can build many apps), and the ASGI middleware
that counts every request by route and status and times it to its last byte. With several API
processes on one port (prometheus_client's multiprocess mode) the counts live in shared files and a
scrape of any process answers the sums over all of them. prometheus_client's process (`process_*`) and
platform (`python_info`) collectors describe the process that answers the scrape, in either mode."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.audio.encode import open_encoders
from polyvox.runtime.metrics_files import shared_metrics_dir
from polyvox.server import access_log
from polyvox.server.last_chunk import is_last_chunk

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_TTFA_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """All of one app's metrics, registered in its own `registry` with the collectors read at scrape time.

    In multiprocess mode the metrics below write to the shared files instead and are exported from them,
    summed over the processes; `registry` then holds only the collectors, this process's view. One app
    per process in that mode: two in one process would write the same file entries."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        shared_dir = shared_metrics_dir()
        self._scraped = self.registry if shared_dir is None else _with_shared_files(self.registry, shared_dir)
        r = self.registry if shared_dir is None else None
        self.requests = Counter(
            "polyvox_requests", "HTTP requests answered.", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "polyvox_request_duration_seconds",
            "Request start to last byte sent.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.ttfa = Histogram(
            "polyvox_time_to_first_audio_seconds",
            "Speech request received to first audio byte ready to send.",
            ["stream"],
            buckets=_TTFA_BUCKETS,
            registry=r,
        )
        self.audio_seconds = Counter("polyvox_audio_seconds", "Seconds of audio generated.", registry=r)
        self.input_chars = Counter("polyvox_input_characters", "Characters of input synthesised.", registry=r)
        # Each process's own requests, so summed over the processes alive (a dead one's are gone).
        self.in_flight = Gauge(
            "polyvox_requests_in_flight", "Syntheses running now.", registry=r, multiprocess_mode="livesum"
        )
        self.queue_depth = Gauge(
            "polyvox_queue_depth",
            "Speech requests waiting for a slot.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.errors = Counter("polyvox_errors", "Errors answered, by type.", ["type"], registry=r)
        self.backend_restarts = Counter(
            "polyvox_engine_restarts", "Times the engine was restarted after it stopped serving.", registry=r
        )
        self.answers_run_again = Counter(
            "polyvox_answers_run_again",
            "Answers run again from their start because the engine lost part of their audio (its process "
            "died) before any of it reached the client.",
            registry=r,
        )
        self.cache_lookups = Counter(
            "polyvox_cache_lookups",
            "Speech requests by X-Cache outcome (hit, miss, bypass, adhoc, disabled).",
            ["result"],
            registry=r,
        )
        # One cache shared by the processes, each reporting its size after each change: the latest report
        # (a shared store's total; a directory's as the reporting process's index sees it), never a sum.
        self.cache_entries = Gauge(
            "polyvox_cache_entries",
            "Entries in the audio cache.",
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self.cache_bytes = Gauge(
            "polyvox_cache_bytes", "Bytes in the audio cache.", registry=r, multiprocess_mode="livemostrecent"
        )
        self.registry.register(_EncodersCollector())
        # This process's own CPU, memory and file descriptors, and its Python: in multiprocess mode those
        # of the API process that answers the scrape (prometheus_client's docs: a process collector cannot
        # add up processes), never a sum.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def exposition(self) -> bytes:
        """What a scrape of `/metrics` answers, in the Prometheus text format."""
        return generate_latest(self._scraped)

    def cache_changed(self, entries: int, size: int) -> None:
        self.cache_entries.set(entries)
        self.cache_bytes.set(size)

    def admission_changed(self, running: int, waiting: int) -> None:
        self.in_flight.set(running)
        self.queue_depth.set(waiting)

    def synthesis_done(self, response_format: str, route: str, cache: str, engine_s: float | None) -> None:
        """A speech answer sent whole: its format, X-Route and X-Cache values and the seconds spent waiting
        for the back end's audio (None when replayed from the cache). Counted only by `metrics_compat`'s
        series (`server/uttera_metrics.py`)."""


class _EncodersCollector(Collector):
    """The audio encoders open in this process (one per response being encoded), read at scrape time:
    what a stream cut by its client must give back at once."""

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "polyvox_audio_encoders_open",
            "Audio encoders open in this API process: one per response being encoded.",
            value=open_encoders(),
        )


def _with_shared_files(registry: CollectorRegistry, shared_dir: str) -> CollectorRegistry:
    """The metrics in the shared files, summed over the processes, and the collectors of `registry`."""
    scraped = CollectorRegistry()
    MultiProcessCollector(scraped, path=shared_dir)
    scraped.register(registry)
    return scraped


def _route_label(app: ASGIApp, scope: Scope, received: Scope) -> str:
    """The matched route's path template, so label cardinality stays bounded; a mount's own path (the
    playground's assets: `/ui/assets`) for the files under it. `received` is the scope as the request
    came in: a mount rewrites `scope`'s root path on the way down, after which nothing matches it."""
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return route.path
    for candidate in getattr(getattr(app, "router", None), "routes", ()):
        match, _ = candidate.matches(received)
        path = getattr(candidate, "path", None)  # an included router has none
        if match is Match.FULL and path is not None:
            return path
    return "unmatched"  # also a request answered before routing (a missing API key)


class MetricsMiddleware:
    """Counts and times every HTTP request, streaming responses to their final chunk, and logs its access
    line (`access_log`) with what it measured. A request is counted as its last chunk goes out, not after:
    a client that has its whole answer and then reads `/metrics` finds it there."""

    def __init__(self, app: ASGIApp, metrics: Metrics, root: ASGIApp):
        self.app = app
        self.metrics = metrics
        self.root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        received = dict(scope)
        status = 500
        sent = 0
        record = access_log.begin()
        counted = False

        def count() -> None:
            nonlocal counted
            counted = True
            duration = time.perf_counter() - started
            route = _route_label(self.root, scope, received)
            self.metrics.requests.labels(route=route, method=scope["method"], status=str(status)).inc()
            self.metrics.latency.labels(route=route).observe(duration)
            access_log.log_access(received, status, duration, sent, record)

        async def send_wrapper(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
                if is_last_chunk(message) and not counted:
                    count()
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if not counted:  # no last chunk went out: cut off, or failed before its answer
                count()
