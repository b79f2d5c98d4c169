"""`metrics_compat = "uttera"`: `/metrics` also answers uttera-tts-vllm's series, with its names and
labels, counting what was done: requests by endpoint, method and status and their durations,
syntheses running, syntheses by format, lane (X-Route) and X-Cache value, and the engine's time for
those the engine spoke. On one server (a fake engine, to reach every lane), and on the embedded voice
under `--api-server-count 2`, where any API process's scrape answers the sums of both."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest

from engine.processes import engine_pids
from helpers.audio import decode
from helpers.clips import wav_bytes
from helpers.connection_owners import through
from helpers.metrics import parse, scrape, value
from helpers.raw_http import speech_request
from helpers.serve_process import polyvox_serve
from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"


def wait_for(condition: Callable[[], bool], within_s: float = 30.0) -> bool:
    """Whether `condition` came true within `within_s` (a wait, not a measure of speed)."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def synthesised(samples: dict, response_format: str, route: str, cache: str) -> float:
    return value(
        samples, "uttera_tts_synthesis_total", response_format=response_format, route=route, cache=cache
    )


def test_each_lane_and_cache_outcome_is_counted_as_uttera_counts_it(serve, tmp_path):
    gate = threading.Event()
    gate.set()
    backend = FakeBackend(cloning=True, generate_gate=gate)
    url = serve(backend, metrics_compat="uttera", cache_enabled=True, cache_dir=tmp_path / "cache")
    body = {"input": "Counted as uttera counts it.", "voice": "alloy", "response_format": "mp3"}

    first = httpx.post(f"{url}{SPEECH}", json=body)
    again = httpx.post(f"{url}{SPEECH}", json=body)
    bypass = httpx.post(f"{url}{SPEECH}", json={**body, "cache": False})
    tone = np.sin(np.linspace(0, 2 * np.pi * 440 * 2, 48000)) * 0.3  # a 2 s clip to clone
    adhoc = httpx.post(
        f"{url}{SPEECH}",
        data={"input": "A one-off clone.", "response_format": "flac"},
        files={"custom_voice_file": ("me.wav", wav_bytes(tone), "audio/wav")},
    )
    unknown = httpx.post(f"{url}{SPEECH}", json={**body, "voice": "nobody-at-all"})
    assert [r.headers.get("x-cache") for r in (first, again, bypass, adhoc)] == [
        "MISS",
        "HIT",
        "BYPASS",
        "ADHOC",
    ]
    assert unknown.status_code == 400
    assert httpx.get(f"{url}/health").status_code == 200

    samples = scrape(url)
    assert synthesised(samples, "mp3", "HOT", "MISS") == 1
    assert synthesised(samples, "mp3", "CACHE", "HIT") == 1
    assert synthesised(samples, "mp3", "HOT", "BYPASS") == 1
    assert synthesised(samples, "flac", "ADHOC", "ADHOC") == 1
    # the engine spoke all but the cache hit
    assert value(samples, "uttera_tts_inference_duration_seconds_count", op="synthesis") == 3
    ok = {"endpoint": SPEECH, "method": "POST"}
    assert value(samples, "uttera_tts_requests_total", **ok, status="200") == 4
    assert value(samples, "uttera_tts_requests_total", **ok, status="400") == 1
    assert value(samples, "uttera_tts_request_duration_seconds_count", **ok) == 5
    assert value(samples, "uttera_tts_requests_total", endpoint="/health", method="GET", status="200") == 1
    assert not any(
        name.startswith("uttera_") and ("endpoint", "/metrics") in labels for name, labels in samples
    )
    assert value(samples, "uttera_tts_inflight_requests") == 0

    gate.clear()  # the next synthesis waits before its first chunk: running, in flight
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(httpx.post, f"{url}{SPEECH}", json={**body, "input": "Held."}, timeout=60)
        assert wait_for(lambda: value(scrape(url), "uttera_tts_inflight_requests") == 1)
        gate.set()
        assert held.result().status_code == 200
    assert value(scrape(url), "uttera_tts_inflight_requests") == 0


def test_without_the_setting_no_uttera_series_is_exported(serve):
    url = serve(FakeBackend())
    assert httpx.post(f"{url}{SPEECH}", json={"input": "Only polyvox's own."}).status_code == 200
    samples = scrape(url)
    assert value(samples, "polyvox_requests_total", route=SPEECH, method="POST", status="200") == 1
    assert not [name for name, _ in samples if name.startswith("uttera_")]


SCRAPE = b"GET /metrics HTTP/1.1\r\nHost: polyvox\r\nConnection: close\r\n\r\n"


@pytest.mark.timeout(300)
def test_two_api_processes_answer_the_sums_of_both(tmp_path):
    flags = (
        "--api-server-count",
        "2",
        "--metrics-compat",
        "uttera",
        "--voices-dir",
        str(tmp_path / "voices"),
    )
    with polyvox_serve(*flags, "--log-level", "warning") as (launcher, url):
        pids = engine_pids(launcher.pid)  # the embedded voice: the spawned children are the API processes
        assert len(pids) == 2
        for n in range(4):  # through the official client, wherever the kernel deals the connections
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
            speech = client.audio.speech.create(model="tts-1", voice="alloy", input=f"Request number {n}.")
            assert decode(speech.content)[0].size > 0
            client.close()
        for pid in pids:  # and one through each API process for sure
            assert through(url, pid, pids, speech_request(f"Through {pid}.")).startswith(b"HTTP/1.1 200")

        for pid in pids:  # each process's scrape answers the sums of both
            answer = through(url, pid, pids, SCRAPE)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            samples = parse(answer.split(b"\r\n\r\n", 1)[1].decode())
            ok = {"endpoint": SPEECH, "method": "POST", "status": "200"}
            assert value(samples, "uttera_tts_requests_total", **ok) == 6
            duration = value(
                samples, "uttera_tts_request_duration_seconds_count", endpoint=SPEECH, method="POST"
            )
            assert duration == 6
            # the tests' cache is off (conftest): each answer the engine's, X-Cache DISABLED
            assert synthesised(samples, "mp3", "HOT", "DISABLED") == 6
            assert value(samples, "uttera_tts_inference_duration_seconds_count", op="synthesis") == 6
            assert value(samples, "uttera_tts_inflight_requests") == 0
