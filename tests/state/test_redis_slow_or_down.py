"""Speech needs nothing from Redis to be spoken: a real server on loopback around the fake engine, with
`state_url` on a real redis-server and no API key (an open server). Redis frozen (SIGSTOP): every
speech request is answered within a client timeout well under what one Redis socket timeout cost
before (3 s). Redis stopped: speech goes on, the usage it cannot write is logged once, kept, and
counted by `GET /v1/usage` once Redis is back; past the backlog's bound the requests lost are counted
on `/metrics`."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from helpers.metrics import scrape, value
from helpers.redis_server import RedisServer
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.tenancy import usage_writer
from polyvox.settings import Settings

CLIENT_TIMEOUT_S = 2.5  # per request: one Redis socket timeout (3 s) on its path used to exceed it


def speech(n: int, stream: bool = False, model: str = "tts-1") -> dict:
    return {"model": model, "input": f"Request number {n}.", "response_format": "wav", "stream": stream}


def settings(redis: RedisServer) -> Settings:
    return Settings(state_url=redis.url, state_sync_interval_s=0.2)


@contextmanager
def frozen(redis: RedisServer) -> Iterator[None]:
    assert redis.proc is not None
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)


def speak(client: httpx.Client, url: str, body: dict) -> httpx.Response:
    answer = client.post(f"{url}/v1/audio/speech", json=body, timeout=CLIENT_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    assert answer.content.startswith(b"RIFF")
    return answer


def usage_requests(url: str) -> int | None:
    """The requests `GET /v1/usage` counts; None while it cannot be read."""
    answer = httpx.get(f"{url}/v1/usage", timeout=CLIENT_TIMEOUT_S)
    if answer.status_code == 503:
        assert answer.json()["error"]["code"] == "usage_unavailable"
        return None
    assert answer.status_code == 200, answer.text
    return sum(row["requests"] for row in answer.json()["data"])


def eventually_counted(url: str, expected: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (counted := usage_requests(url)) != expected:
        assert time.monotonic() < deadline, f"GET /v1/usage counts {counted} requests, not {expected}"
        time.sleep(0.1)


def test_speech_is_answered_while_redis_is_frozen(redis_server: RedisServer) -> None:
    with running_server(create_app(settings(redis_server), FakeBackend())) as url, httpx.Client() as client:
        speak(client, url, speech(0))
        with frozen(redis_server):
            for n in range(1, 7):  # whole files and streams, each within the client's timeout
                speak(client, url, speech(n, stream=n % 2 == 0))
        eventually_counted(url, 7)  # what was spoken while it was frozen is counted once it answers


def test_usage_while_redis_is_down_is_logged_once_and_counted_when_it_returns(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    down_for = 12
    with running_server(create_app(settings(redis_server), FakeBackend())) as url, httpx.Client() as client:
        redis_server.stop()
        with caplog.at_level(logging.WARNING):
            for n in range(down_for):
                speak(client, url, speech(n))
        about_usage = [r for r in caplog.records if "usage" in r.getMessage()]
        assert len(about_usage) == 1, [r.getMessage() for r in about_usage]
        assert about_usage[0].levelno == logging.WARNING
        assert usage_requests(url) is None  # 503 usage_unavailable, not a 500
        redis_server.start()  # empty: what it counted before is gone, what was kept is written
        eventually_counted(url, down_for)
        speak(client, url, speech(down_for))
        assert usage_requests(url) == down_for + 1  # written again before the answer, as before


def test_past_the_backlog_bound_lost_requests_are_counted(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage_writer, "MAX_BACKLOG_ROWS", 1)  # one row kept: one model's
    with running_server(create_app(settings(redis_server), FakeBackend())) as url, httpx.Client() as client:
        redis_server.stop()
        for n in range(3):
            speak(client, url, speech(n, model="tts-1"))
        for n in range(2):
            speak(client, url, speech(n, model="tts-1-hd"))  # a second row: no room
        dropped = value(scrape(url), "polyvox_usage_dropped_total", key="(anonymous)")
        assert dropped == 2
        redis_server.start()
        eventually_counted(url, 3)
