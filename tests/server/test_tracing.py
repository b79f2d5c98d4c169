"""OpenTelemetry traces (`otel_traces`): a real server in this process, its spans caught by the
OpenTelemetry SDK's InMemorySpanExporter: one server span per request, parented on the client's
`traceparent`, and a speech request's children; none with the setting off."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from helpers.audio import decode

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
SPEECH_CHILDREN = {"text_frontend", "queue_wait", "engine", "first_audio", "encode"}


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """This process's tracer provider (installed once: OpenTelemetry allows one per process), its spans
    kept in memory for the tests."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        provider = sdk_trace.TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    processor = SimpleSpanProcessor(memory)
    provider.add_span_processor(processor)
    yield memory
    processor.shutdown()


def spans_of(exporter: InMemorySpanExporter, request_id: str) -> tuple[object, list]:
    """The server span of the request answered with X-Request-Id `request_id`, and its children. The
    server span ends just after the answer's last byte is sent: waited for."""
    for _ in range(500):
        spans = exporter.get_finished_spans()
        roots = [s for s in spans if s.attributes.get("polyvox.request_id") == request_id]
        if roots:
            break
        time.sleep(0.01)
    [root] = roots
    children = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
    return root, children


def test_a_speech_request_is_one_span_with_a_child_per_stage(serve, exporter) -> None:
    url = serve(otel_traces=True)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    traceparent = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    spoken = client.audio.speech.with_raw_response.create(
        model="tts-1", voice="alloy", input="Hello there.", extra_headers={"traceparent": traceparent}
    )
    samples, _ = decode(spoken.content)
    assert samples.size > 0

    root, children = spans_of(exporter, spoken.headers["x-request-id"])
    assert root.name == "POST /v1/audio/speech" and root.kind == trace.SpanKind.SERVER
    assert root.attributes["http.response.status_code"] == 200
    assert format(root.context.trace_id, "032x") == CLIENT_TRACE  # the client's trace goes on here
    assert format(root.parent.span_id, "016x") == CLIENT_SPAN
    by_name = {span.name: span for span in children}
    assert set(by_name) == SPEECH_CHILDREN, sorted(by_name)
    for span in children:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time, span.name
    engine, first, encode = by_name["engine"], by_name["first_audio"], by_name["encode"]
    assert by_name["text_frontend"].end_time <= by_name["queue_wait"].start_time  # in the order they ran
    assert by_name["queue_wait"].end_time <= engine.start_time == first.start_time
    assert first.end_time <= root.end_time and encode.attributes["polyvox.encodes"] >= 1
    assert engine.attributes["polyvox.finished"] is True


def test_a_cache_hit_has_no_engine_span(serve, exporter, tmp_path) -> None:
    url = serve(otel_traces=True, cache_enabled=True, cache_dir=str(tmp_path))
    body = {"input": "Twice the same.", "response_format": "wav"}
    answers = [httpx.post(f"{url}/v1/audio/speech", json=body) for _ in range(2)]
    assert [a.headers["x-cache"] for a in answers] == ["MISS", "HIT"]
    _, children = spans_of(exporter, answers[1].headers["x-request-id"])
    assert {span.name for span in children} == SPEECH_CHILDREN - {"engine", "queue_wait"}


def test_other_routes_are_spans_named_by_their_route(serve, exporter) -> None:
    url = serve(otel_traces=True)
    missing = httpx.get(f"{url}/v1/audio/voices/nobody")
    assert missing.status_code == 404
    root, children = spans_of(exporter, missing.headers["x-request-id"])
    assert root.name == "GET /v1/audio/voices/{voice_id}" and children == []
    assert root.attributes["http.response.status_code"] == 404


def test_no_span_with_otel_traces_off(serve, exporter) -> None:
    url = serve()
    exporter.clear()
    assert httpx.post(f"{url}/v1/audio/speech", json={"input": "Not traced."}).status_code == 200
    assert exporter.get_finished_spans() == ()


def test_an_exporter_polyvox_does_not_know_is_refused_at_start() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "serve", "--otel-traces", "--port", "0", "--no-cache-enabled"],
        env={**os.environ, "OTEL_TRACES_EXPORTER": "jaeger"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "OTEL_TRACES_EXPORTER='jaeger': polyvox exports to otlp, console or none" in result.stderr
