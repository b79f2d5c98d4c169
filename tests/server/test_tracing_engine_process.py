"""A speech request's trace crosses into the engine process: `polyvox serve` with the tiny random
checkpoint in an engine process, `--otel-traces` and OpenTelemetry's console exporter (one JSON object
per span on stderr, from the API process and the engine process alike), read after the server exits."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from helpers.audio import decode
from helpers.serve_process import polyvox_serve

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
pytestmark = pytest.mark.timeout(300)

TINY = ("--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "256", "--no-cache-enabled")
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module")
def spans() -> Iterator[list[dict]]:
    """Every span the server and its engine process exported for one speech request, in the trace its
    client started."""
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    with polyvox_serve(*TINY, "--otel-traces", "--log-level", "warning", env=env) as (proc, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        # alloy is a voice design, frozen into a clip by the engine on its first use (spans of their own
        # in that request's trace): done first, in another trace
        client.audio.speech.create(model="tts-1", voice="alloy", input="A first request.")
        spoken = client.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input="Hello there.",
            extra_headers={"traceparent": f"00-{CLIENT_TRACE}-b7ad6b7169203331-01"},
        )
        samples, _ = decode(spoken.content)
        assert samples.size > 0
        proc.terminate()  # drains, stops its engine process: both export what they hold as they exit
        output, _ = proc.communicate(timeout=120)
    found = []
    for line in output.splitlines():
        if line.startswith("{") and '"context"' in line:
            found.append(json.loads(line))
    yield [span for span in found if span["context"]["trace_id"] == f"0x{CLIENT_TRACE}"]


def by_name(spans: list[dict], name: str) -> dict:
    [span] = [span for span in spans if span["name"] == name]
    return span


def test_the_engine_process_spans_join_the_request_s_trace(spans: list[dict]) -> None:
    root = by_name(spans, "POST /v1/audio/speech")
    prepare, generate = by_name(spans, "engine.prepare"), by_name(spans, "engine.generate")
    for span in (prepare, generate):
        assert span["parent_id"] == root["context"]["span_id"]  # the context crossed in Generate
        assert span["attributes"]["polyvox.engine_pid"] > 0
    assert generate["attributes"]["polyvox.outcome"] == "finished"
    assert prepare["end_time"] <= generate["start_time"]


def test_the_api_process_spans_are_there_too(spans: list[dict]) -> None:
    root = by_name(spans, "POST /v1/audio/speech")
    children = {span["name"] for span in spans if span["parent_id"] == root["context"]["span_id"]}
    assert children == {
        "text_frontend",
        "queue_wait",
        "engine",
        "first_audio",
        "encode",
        "engine.prepare",
        "engine.generate",
    }
