"""OpenTelemetry traces of HTTP requests (`otel_traces`, the `otel` extra): FastAPI's server span per
request (parented on the client's `traceparent` when it sends one; its `polyvox.request_id`, the
answer's X-Request-Id, set by `request_id`), and a speech request's children:
`text_frontend` (the input prepared into pieces and checked), `queue_wait` (waiting for an admission
slot), `engine` (the back end's audio, asked for to its last chunk), `first_audio` (the back end asked to
the first encoded bytes) and `encode` (the first encoding to the last, its busy time an attribute).
An engine process adds its own spans to the same trace (`engine/request_spans.py`): the trace
context crosses in its messages. With `otel_traces` off no span is made."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

from fastapi.telemetry import TelemetryConfig

from polyvox.runtime import otel
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings

T = TypeVar("T")


def install(settings: Settings) -> TelemetryConfig:
    """FastAPI's telemetry for the app: with `otel_traces` on, its server span per HTTP request (the
    children below hang from it) exported as `otel.install_provider` says; with it off, none (FastAPI
    would otherwise trace whenever some provider is installed). Its own metrics and logs stay off:
    /metrics and polyvox's log lines say those. StartupError when the `otel` extra is missing."""
    off: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
    if not settings.otel_traces:
        return off
    if not otel.available():
        raise StartupError(
            "otel_traces needs the OpenTelemetry SDK: pip install 'polyvox[otel]' (or turn otel_traces off)"
        )
    try:
        otel.install_provider()
    except ValueError as exc:
        raise StartupError(f"otel_traces: {exc}") from exc
    return {**off, "tracing": True, "auto_configure": False}


def _parent() -> Any:
    """The current span when it is recorded (a traced request), else None."""
    tracer = otel.tracer()
    if tracer is None:
        return None
    from opentelemetry import trace

    span = trace.get_current_span()
    return span if span.is_recording() else None


@contextlib.contextmanager
def span(name: str) -> Iterator[None]:
    """A child of the traced request's span, current for the block (a coroutine's, never across an
    async generator's yields); nothing outside a traced request."""
    if _parent() is None:
        yield
        return
    with otel.tracer().start_as_current_span(name):
        yield


class AudioSpans:
    """The spans of one answer's audio: made with explicit parent and times, since the async generator
    that makes the audio cannot hold a current span across its yields. `from_engine`: False for audio
    replayed from the cache (no `engine` span)."""

    def __init__(self, from_engine: bool):
        self.parent = _parent()
        self.from_engine = from_engine
        self.started = time.time_ns()
        self.engine_done: int | None = None
        self.first_audio: int | None = None
        self.encode_first: int | None = None
        self.encode_last = 0
        self.encode_busy_ns = 0
        self.encodes = 0

    async def encoding(self, work: Awaitable[T]) -> T:
        """`work`'s result (an encoding), timed."""
        if self.parent is None:
            return await work
        started = time.time_ns()
        try:
            encoded = await work
        finally:
            self.encode_last = time.time_ns()
            self.encode_first = self.encode_first or started
            self.encode_busy_ns += self.encode_last - started
            self.encodes += 1
        if encoded and self.first_audio is None:  # the first bytes ready to send
            self.first_audio = self.encode_last
        return encoded

    def engine_finished(self) -> None:
        """The back end's last chunk came."""
        self.engine_done = time.time_ns()

    def end(self) -> None:
        """Make the spans (once the answer is over, however it ended)."""
        if self.parent is None:
            return
        from opentelemetry import trace

        tracer, context = otel.tracer(), trace.set_span_in_context(self.parent)
        now = time.time_ns()

        def make(name: str, start: int, end: int, **attributes: Any) -> None:
            tracer.start_span(name, context=context, start_time=start, attributes=attributes).end(end)

        if self.from_engine:
            finished = {"polyvox.finished": self.engine_done is not None}
            make("engine", self.started, self.engine_done or now, **finished)
        if self.first_audio is not None:
            make("first_audio", self.started, self.first_audio)
        if self.encode_first is not None:
            make(
                "encode",
                self.encode_first,
                self.encode_last,
                **{"polyvox.encode_busy_s": self.encode_busy_ns / 1e9, "polyvox.encodes": self.encodes},
            )
        self.parent = None
