"""A client that closes its connection halfway through sending its body (`Content-Length: 100`, 13
bytes, close), on `polyvox serve` with the embedded voice: one log line each, counted as 499 (the
client closed the request), never a 500, an `internal_error` or a traceback."""

from __future__ import annotations

import time

import pytest

from helpers.metrics import scrape, value
from helpers.raw_http import JSON_BODY, MULTIPART, MULTIPART_BODY, partial_request
from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

# (route, content type, what is sent of the body): the routes that read their body themselves, in
# JSON and multipart, and one whose body FastAPI reads (the lexicon's).
CUT = [
    ("/v1/audio/speech", "application/json", JSON_BODY[:13]),
    ("/v1/audio/speech", MULTIPART, MULTIPART_BODY[:13]),
    ("/v1/audio/voices", MULTIPART, MULTIPART_BODY[:13]),
    ("/v1/audio/voice_consents", MULTIPART, MULTIPART_BODY[:13]),
    ("/admin/lexicon", "application/json", b'{"term": "pol'),
]


def _counted(url: str, route: str, status: str) -> float:
    return value(scrape(url), "polyvox_requests_total", route=route, method="POST", status=status)


def test_a_body_cut_by_its_client_is_a_499_and_one_log_line() -> None:
    with polyvox_serve("--no-cache-enabled") as (proc, url):
        for path, content_type, body in CUT:
            partial_request(url, path, content_type, body, declared=len(body) + 87).close()
        routes = {path for path, _, _ in CUT}
        expected = {path: sum(1 for p, _, _ in CUT if p == path) for path in routes}
        deadline = time.monotonic() + 30
        while any(_counted(url, path, "499") < n for path, n in expected.items()):
            assert time.monotonic() < deadline, scrape(url)
            time.sleep(0.05)
        samples = scrape(url)
        proc.terminate()
        proc.wait(timeout=60)
        log = proc.stdout.read()
    for path in routes:
        assert value(samples, "polyvox_requests_total", route=path, method="POST", status="500") == 0
    assert value(samples, "polyvox_errors_total", type="internal_error") == 0
    assert "Traceback" not in log and "ERROR" not in log, log
    lines = [line for line in log.splitlines() if "before the whole request body arrived" in line]
    assert len(lines) == len(CUT), log
    for path in routes:
        assert sum(line.endswith(f"POST {path}") for line in lines) == expected[path], lines
