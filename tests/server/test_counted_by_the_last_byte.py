"""A request is counted (`polyvox_requests_total`, uttera-tts-vllm's `uttera_tts_requests_total`) as its
last chunk goes out, not after its app returns: a client that has its whole answer and then reads
`/metrics` finds it there. Work after the last chunk (a streamed answer's clean-up) used to leave a moment
when the client had everything and the count did not; the suite's metric tests lost that race once their
HTTP clients were cheap to make. Here the app holds such work open while the last chunk is delivered."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from polyvox.server.metrics import Metrics, MetricsMiddleware
from polyvox.server.uttera_metrics import UtteraMetrics, UtteraRequestsMiddleware


async def answer_then_clean_up(scope, receive, send) -> None:
    """An answer in two chunks, then work that runs after the client has all of it."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"first", "more_body": True})
    await send({"type": "http.response.body", "body": b"last", "more_body": False})
    await asyncio.sleep(0.05)  # the clean-up: the client may read /metrics meanwhile


def requests_counted(metrics: Metrics, name: str) -> float:
    text = generate_latest(metrics.registry).decode()
    lines = [line for line in text.splitlines() if line.startswith(f"{name}{{") and 'status="200"' in line]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


@pytest.mark.parametrize(
    ("middleware", "name"),
    [(MetricsMiddleware, "polyvox_requests_total"), (UtteraRequestsMiddleware, "uttera_tts_requests_total")],
)
def test_a_request_is_counted_by_the_time_its_last_chunk_reaches_the_client(middleware, name) -> None:
    metrics = UtteraMetrics()
    app = middleware(answer_then_clean_up, metrics, root=answer_then_clean_up)
    scope = {"type": "http", "method": "POST", "path": "/v1/audio/speech", "headers": [], "root_path": ""}
    counted_when_delivered: list[float] = []

    async def client(message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            counted_when_delivered.append(requests_counted(metrics, name))

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    asyncio.run(app(scope, receive, client))
    assert counted_when_delivered == [1.0]
    assert requests_counted(metrics, name) == 1.0  # once, not again as the app returned


@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])  # Starlette streams these two ways
def test_a_streamed_answer_is_released_and_its_usage_recorded_by_the_time_its_last_chunk_goes_out(
    spec_version: str,
) -> None:
    """The speech routes release a streamed request and record the key's usage in the response's
    `on_close`; it used to run after the chunked transfer's end, so a client that had the whole answer and
    read its usage at once could miss the request (a test of two API processes did, under load)."""
    from polyvox.server.speech.streaming import SpeechStreamResponse

    done: list[str] = []
    seen_at_the_end: list[list[str]] = []

    async def content():
        yield b"first"
        yield b"last"

    async def on_close() -> None:
        await asyncio.sleep(0.05)  # a usage store's write
        done.append("recorded")

    async def client(message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            seen_at_the_end.append(list(done))

    async def receive():
        await asyncio.Event().wait()  # the client stays connected

    response = SpeechStreamResponse(content(), on_close=on_close, media_type="audio/mpeg")
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/audio/speech",
        "headers": [],
        "asgi": {"spec_version": "2.4"},
    }
    asyncio.run(response(scope, receive, client))
    assert seen_at_the_end == [["recorded"]]
    assert done == ["recorded"]  # once, not again as the response returned
