"""Liveness, readiness and the Prometheus metrics, through a real server."""

from __future__ import annotations

import threading
import time

import httpx

from helpers.metrics import scrape, value
from polyvox.backends.fake import FakeBackend


def test_ready_is_503_until_the_engine_has_started(serve) -> None:
    gate = threading.Event()
    url = serve(FakeBackend(ready_gate=gate), wait_ready=False)
    assert httpx.get(f"{url}/health").status_code == 200
    not_ready = httpx.get(f"{url}/ready")
    assert not_ready.status_code == 503
    assert not_ready.json()["error"]["code"] == "engine_not_ready"
    speech = httpx.post(f"{url}/v1/audio/speech", json={"input": "too early"})
    assert speech.status_code == 503
    assert "Retry-After" in speech.headers
    gate.set()
    for _ in range(500):
        if httpx.get(f"{url}/ready").status_code == 200:
            break
        time.sleep(0.02)
    assert httpx.get(f"{url}/ready").json()["status"] == "ready"
    assert httpx.post(f"{url}/v1/audio/speech", json={"input": "now"}).status_code == 200


def test_ready_reports_an_engine_that_failed_to_start(serve) -> None:
    class BrokenBackend(FakeBackend):
        async def start(self) -> None:
            raise RuntimeError("no weights here")

    url = serve(BrokenBackend(), wait_ready=False)
    response = httpx.get(f"{url}/ready")
    for _ in range(200):
        if response.json()["error"]["code"] == "engine_failed":
            break
        time.sleep(0.02)
        response = httpx.get(f"{url}/ready")
    assert response.status_code == 503
    assert "no weights here" in response.json()["error"]["message"]
    assert httpx.get(f"{url}/health").status_code == 200


def test_health_answers_get_and_head(serve) -> None:
    url = serve()
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}
    head = httpx.head(f"{url}/health")
    assert head.status_code == 200
    assert head.content == b""


def test_metrics_count_requests_audio_characters_and_errors(serve) -> None:
    backend = FakeBackend(seconds_per_char=0.01)
    url = serve(backend)
    texts = ["one two three", "four five six seven"]
    for text in texts:
        assert (
            httpx.post(
                f"{url}/v1/audio/speech", json={"input": text, "response_format": "pcm", "stream": False}
            ).status_code
            == 200
        )
    streamed = httpx.post(
        f"{url}/v1/audio/speech",
        json={"input": "streamed", "response_format": "pcm", "stream_format": "audio"},
    )
    assert streamed.status_code == 200
    assert httpx.post(f"{url}/v1/audio/speech", json={"input": "x", "voice": "nobody"}).status_code == 400
    assert httpx.get(f"{url}/no/such/route").status_code == 404

    samples = scrape(url)
    speech = {"route": "/v1/audio/speech", "method": "POST"}
    assert value(samples, "polyvox_requests_total", **speech, status="200") == 3
    assert value(samples, "polyvox_requests_total", **speech, status="400") == 1
    assert value(samples, "polyvox_requests_total", route="unmatched", method="GET", status="404") == 1
    assert value(samples, "polyvox_request_duration_seconds_count", route="/v1/audio/speech") == 4
    chars = sum(map(len, texts)) + len("streamed")
    assert value(samples, "polyvox_input_characters_total") == chars
    audio_s = value(samples, "polyvox_audio_seconds_total")
    assert abs(audio_s - chars * 0.01) < 0.01
    assert value(samples, "polyvox_time_to_first_audio_seconds_count", stream="false") == 2
    assert value(samples, "polyvox_time_to_first_audio_seconds_count", stream="true") == 1
    assert value(samples, "polyvox_errors_total", type="voice_not_found") == 1
    assert value(samples, "polyvox_errors_total", type="not_found") == 1
    assert value(samples, "polyvox_requests_in_flight") == 0
    assert value(samples, "polyvox_queue_depth") == 0


def test_each_app_has_its_own_registry(serve) -> None:
    first, second = serve(), serve()
    httpx.post(f"{first}/v1/audio/speech", json={"input": "only the first"})
    speech = {"route": "/v1/audio/speech", "method": "POST", "status": "200"}
    assert value(scrape(first), "polyvox_requests_total", **speech) == 1
    assert value(scrape(second), "polyvox_requests_total", **speech) == 0
