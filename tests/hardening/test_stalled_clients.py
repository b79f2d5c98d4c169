"""Clients that send part of a request and stall, on `polyvox serve` with the embedded voice and a
2 s `request_read_timeout_s`: every one is answered 408 in OpenAI's shape and its connection closed
(those that sent a whole head, and those that did not), while the official client's requests are
served beside them; SIGTERM afterwards exits 0 with no traceback. The same with two API processes
(`--api-server-count 2`), whose every process must apply the setting."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from helpers.audio import decode
from helpers.metrics import scrape, value
from helpers.raw_http import (
    JSON_BODY,
    MULTIPART,
    MULTIPART_BODY,
    header,
    partial_head,
    partial_request,
    read_until_closed,
    status_and_error,
)
from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

READ_TIMEOUT_S = 2
MARGIN_S = 20  # generous: a loaded 2-core machine; a stalled connection that is never cut still fails
FLAGS = ("--no-cache-enabled", "--log-level", "warning", "--request-read-timeout-s", str(READ_TIMEOUT_S))

# Stalled halfway through the body, in the shapes a body is read in: JSON, a multipart clone
# reference, a voice upload, a consent upload, and a body FastAPI reads (the lexicon's).
BODY_STALLS: list[Callable[[str], socket.socket]] = [
    lambda url: partial_request(url, "/v1/audio/speech", "application/json", JSON_BODY[:13], 100),
    lambda url: partial_request(url, "/v1/audio/speech", MULTIPART, MULTIPART_BODY, 100_000),
    lambda url: partial_request(url, "/v1/audio/voices", MULTIPART, MULTIPART_BODY, 100_000),
    lambda url: partial_request(url, "/v1/audio/voice_consents", MULTIPART, MULTIPART_BODY, 100_000),
    lambda url: partial_request(url, "/admin/lexicon", "application/json", b'{"term": "pol', 100),
]


def _stall(url: str, count: int) -> tuple[list[socket.socket], list[socket.socket]]:
    """`count` stalled connections: four in five stalled in their body, one in five in its head."""
    bodies = [BODY_STALLS[i % len(BODY_STALLS)](url) for i in range(count - count // 5)]
    heads = [partial_head(url, "/v1/audio/speech") for _ in range(count // 5)]
    return bodies, heads


def _speak(url: str, i: int) -> float:
    """One request through the official client, decoded; its length in seconds."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input=f"Request number {i} is served.", response_format="wav"
    )
    samples, rate = decode(audio.content)
    return samples.size / rate


def _assert_cut_with_408(sockets: list[socket.socket]) -> list[bytes]:
    answers = []
    for sock in sockets:
        answer = read_until_closed(sock, READ_TIMEOUT_S + MARGIN_S)  # socket.timeout: never cut
        status, error = status_and_error(answer)
        assert status == 408 and error["code"] == "request_timeout", answer
        assert error["type"] == "invalid_request_error" and "request_read_timeout_s" in error["message"]
        assert header(answer, "connection") == "close", answer
        answers.append(answer)
    return answers


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    return proc.stdout.read()


def test_50_stalled_clients_are_cut_with_408_while_others_are_served() -> None:
    with polyvox_serve(*FLAGS) as (proc, url):
        bodies, heads = _stall(url, 50)
        with ThreadPoolExecutor(4) as pool:
            served = list(pool.map(lambda i: _speak(url, i), range(4)))
        answers = _assert_cut_with_408(bodies)
        _assert_cut_with_408(heads)
        samples = scrape(url)
        log = _stop(proc)
    assert all(seconds > 0.5 for seconds in served), served
    # a body's 408 went through the app: counted, and named by its request id like any answer
    assert all(header(answer, "x-request-id") for answer in answers)
    counted = sum(
        value(samples, "polyvox_requests_total", route=route, method="POST", status="408")
        for route in ("/v1/audio/speech", "/v1/audio/voices", "/v1/audio/voice_consents", "/admin/lexicon")
    )
    assert counted == len(bodies)
    assert value(samples, "polyvox_errors_total", type="request_timeout") == len(bodies)
    assert "Traceback" not in log and "ERROR" not in log, log


def test_every_api_process_cuts_stalled_clients() -> None:
    with polyvox_serve(*FLAGS, "--api-server-count", "2") as (proc, url):
        bodies, heads = _stall(url, 20)
        assert _speak(url, 0) > 0.5
        _assert_cut_with_408(bodies)
        _assert_cut_with_408(heads)
        log = _stop(proc)
    assert "Traceback" not in log and "ERROR" not in log, log


def test_sigterm_does_not_wait_for_bodies_that_stall() -> None:
    """A read deadline longer than the drain: once the drain is over, bodies still on their way are
    not waited for (nor answered 500 with a traceback when uvicorn gives up on them)."""
    flags = ("--no-cache-enabled", "--log-level", "warning", "--shutdown-grace-s", "1")
    with polyvox_serve(*flags, "--request-read-timeout-s", "600") as (proc, url):
        bodies, _ = _stall(url, 10)
        assert _speak(url, 0) > 0.5
        log = _stop(proc)
        for sock in bodies:
            assert b" 500 " not in read_until_closed(sock, MARGIN_S)  # closed, never a 500
    assert "Traceback" not in log and "ERROR" not in log, log


def test_a_drain_cuts_bodies_that_stall_at_once() -> None:
    """30 requests that declare a body and send none, then SIGTERM with a drain (600 s) and a read
    deadline (600 s) longer than the test waits: each is answered 503 `shutting_down` with its
    connection closed, and the server exits 0 without waiting for them."""
    flags = ("--no-cache-enabled", "--log-level", "warning", "--shutdown-grace-s", "600")
    with polyvox_serve(*flags, "--request-read-timeout-s", "600") as (proc, url):
        stalled = [partial_request(url, "/v1/audio/speech", "application/json", b"", 100) for _ in range(30)]
        assert _speak(url, 0) > 0.5
        log = _stop(proc)
    for sock in stalled:
        answer = read_until_closed(sock, MARGIN_S)
        status, error = status_and_error(answer)
        assert (status, error["code"]) == (503, "shutting_down"), answer
        assert header(answer, "connection") == "close" and header(answer, "retry-after") == "5"
    assert "Traceback" not in log and "ERROR" not in log, log
