"""`polyvox serve` as a real process with the embedded voice: SIGTERM under load drains (ready turns
503, new requests get 503, every in-flight request completes) and exits 0; a full disk under the
cache degrades to no caching; the open-server warning beyond loopback."""

from __future__ import annotations

import resource
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers.audio import decode
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

SPEECH = "/v1/audio/speech"
SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs far away."  # about 4 s of speech
LONG = " ".join([SENTENCE] * 2)


def test_sigterm_under_load_drains_in_flight_requests_and_exits_0() -> None:
    flags = ("--max-concurrent-requests", "2", "--max-queue", "8", "--shutdown-grace-s", "120")
    with polyvox_serve(*flags, "--no-cache-enabled") as (proc, url):
        results: list[httpx.Response | Exception] = []

        def speak(i: int) -> None:
            body = {"input": f"Request {i}. {LONG}", "response_format": "mp3"}
            if i % 2:
                body["stream_format"] = "audio"
            try:
                results.append(httpx.post(f"{url}{SPEECH}", json=body, timeout=120))
            except Exception as exc:  # noqa: BLE001 - any failure is a lost request
                results.append(exc)

        clients = [threading.Thread(target=speak, args=(i,)) for i in range(4)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 30
        while (
            value(samples := scrape(url), "polyvox_requests_in_flight")
            + value(samples, "polyvox_queue_depth")
            < 4
        ):
            assert time.monotonic() < deadline, "the load never arrived"
            time.sleep(0.02)

        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while (ready := httpx.get(f"{url}/ready")).status_code == 200:  # until the signal is handled
            assert time.monotonic() < deadline, "SIGTERM never reached /ready"
            time.sleep(0.02)
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "shutting_down"
        refused = httpx.post(f"{url}{SPEECH}", json={"input": "Too late."})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"

        for client in clients:
            client.join(timeout=120)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert len(results) == 4
    for response in results:
        assert isinstance(response, httpx.Response), response
        assert response.status_code == 200
        samples, rate = decode(response.content)
        assert samples.size / rate > 8.0  # the whole utterance (two sentences), not a cut-off stream
    assert "Traceback" not in log and "draining" in log


def _limit_file_size() -> None:
    """In the child: no file may grow past 64 KiB (writes fail with EFBIG instead of killing it)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))


def test_a_full_disk_under_the_cache_means_no_caching_not_errors(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with polyvox_serve("--cache-enabled", "--cache-dir", str(cache), preexec=_limit_file_size) as (proc, url):
        big = {"input": SENTENCE, "response_format": "wav"}  # ~4 s at 22 kHz: ~190 KB, past 64 KiB
        for _ in range(2):
            response = httpx.post(f"{url}{SPEECH}", json=big, timeout=120)
            assert response.status_code == 200
            assert response.headers["X-Cache"] == "MISS"
            samples, rate = decode(response.content)
            assert samples.size / rate > 3.0
        small = {"input": "Hi.", "response_format": "wav"}  # fits: the cache still works for it
        assert httpx.post(f"{url}{SPEECH}", json=small).headers["X-Cache"] == "MISS"
        assert httpx.post(f"{url}{SPEECH}", json=small).headers["X-Cache"] == "HIT"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert len(list(cache.glob("*.pcm"))) == 1 and list(cache.glob("*.tmp")) == []
    assert "audio cache write failed" in log and "Traceback" not in log


def test_open_server_beyond_loopback_warns_at_start() -> None:
    with polyvox_serve("--no-cache-enabled", host="0.0.0.0") as (proc, _):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert "beyond loopback, with no API key" in log
    with polyvox_serve("--no-cache-enabled", "--api-keys", "k1", host="0.0.0.0") as (proc, _):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert "beyond loopback" not in proc.stdout.read()
