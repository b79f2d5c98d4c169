"""uttera-tts-vllm's `/metrics` series beside polyvox's own (`metrics_compat = "uttera"`), with its names,
labels and buckets, so dashboards and alerts built for that server keep working: requests by endpoint,
method and status, their duration, syntheses running, syntheses by format, lane and X-Cache value, and
how long the back end took. Like polyvox's series, they live in the shared files when several API
processes serve one port, so a scrape of any of them answers the sums."""

from __future__ import annotations

import time

from fastapi import FastAPI
from prometheus_client import Counter, Gauge, Histogram
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.runtime.metrics_files import shared_metrics_dir
from polyvox.server.last_chunk import is_last_chunk
from polyvox.server.metrics import Metrics
from polyvox.settings import Settings

# uttera-tts-vllm's own buckets: the whole request 25 ms to 60 s, the back end's part 25 ms to 30 s.
_REQUEST_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_INFERENCE_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# uttera-tts-vllm does not count its own scrapes.
_NOT_COUNTED = frozenset({"/metrics"})


class UtteraMetrics(Metrics):
    """polyvox's metrics and uttera-tts-vllm's series beside them, fed by the same events."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry if shared_metrics_dir() is None else None
        self.uttera_requests = Counter(
            "uttera_tts_requests",
            "HTTP requests by endpoint, method and status code.",
            ["endpoint", "method", "status"],
            registry=r,
        )
        self.uttera_request_duration = Histogram(
            "uttera_tts_request_duration_seconds",
            "HTTP request wall-clock duration in seconds.",
            ["endpoint", "method"],
            buckets=_REQUEST_BUCKETS,
            registry=r,
        )
        # Each process's syntheses, summed over the processes alive (as polyvox_requests_in_flight).
        self.uttera_inflight = Gauge(
            "uttera_tts_inflight_requests",
            "Requests currently being processed by the engine.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.uttera_syntheses = Counter(
            "uttera_tts_synthesis",
            "Syntheses by output format, lane (HOT, CACHE, ADHOC) and X-Cache value.",
            ["response_format", "route", "cache"],
            registry=r,
        )
        self.uttera_inference = Histogram(
            "uttera_tts_inference_duration_seconds",
            "Per-request inference time in seconds, by op (synthesis: waiting for the engine's audio).",
            ["op"],
            buckets=_INFERENCE_BUCKETS,
            registry=r,
        )

    def admission_changed(self, running: int, waiting: int) -> None:
        super().admission_changed(running, waiting)
        self.uttera_inflight.set(running)

    def synthesis_done(self, response_format: str, route: str, cache: str, engine_s: float | None) -> None:
        super().synthesis_done(response_format, route, cache, engine_s)
        self.uttera_syntheses.labels(response_format=response_format, route=route, cache=cache).inc()
        if engine_s is not None:
            self.uttera_inference.labels(op="synthesis").observe(engine_s)


class UtteraRequestsMiddleware:
    """Counts and times every HTTP request as uttera-tts-vllm does (its scrapes excepted), to the last
    byte of a streamed answer; the endpoint is the route's path template ("other" for none)."""

    def __init__(self, app: ASGIApp, metrics: UtteraMetrics, root: ASGIApp):
        self.app = app
        self.metrics = metrics
        self.root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _NOT_COUNTED:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        received = dict(scope)  # as it came in: a mount rewrites the scope's paths on the way down
        status = 500
        counted = False

        def count() -> None:  # as the last chunk goes out (MetricsMiddleware does the same)
            nonlocal counted
            counted = True
            endpoint = _endpoint(self.root, scope, received)
            method = scope["method"]
            self.metrics.uttera_requests.labels(endpoint=endpoint, method=method, status=str(status)).inc()
            self.metrics.uttera_request_duration.labels(endpoint=endpoint, method=method).observe(
                time.perf_counter() - started
            )

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif is_last_chunk(message) and not counted:
                count()
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if not counted:
                count()


def _endpoint(app: ASGIApp, scope: Scope, received: Scope) -> str:
    """The route's path template (a bounded set, as uttera-tts-vllm's endpoint label), "other" for none."""
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return route.path
    for candidate in getattr(getattr(app, "router", None), "routes", ()):
        match, _ = candidate.matches(received)
        path = getattr(candidate, "path", None)  # an included router has none
        if match is Match.FULL and path is not None:
            return path
    return "other"  # also a request refused before routing matched nothing


def metrics_for(settings: Settings) -> Metrics:
    """The app's metrics: polyvox's, and with `metrics_compat = "uttera"` uttera-tts-vllm's beside them."""
    return UtteraMetrics() if settings.metrics_compat == "uttera" else Metrics()


def install_compat_metrics(app: FastAPI, metrics: Metrics) -> None:
    """With uttera's series, the middleware that counts requests as uttera-tts-vllm does."""
    if isinstance(metrics, UtteraMetrics):
        app.add_middleware(UtteraRequestsMiddleware, metrics=metrics, root=app)
