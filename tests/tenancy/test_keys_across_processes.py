"""Named keys, limits and usage on real `polyvox serve` processes with the embedded voice: two API
processes on one port (`--api-server-count 2`, limits per process, keys and usage in the shared voices
directory), and two replicas sharing a real redis-server (limits, keys and usage in Redis: exact
across replicas). One key is throttled while the other is served, usage equals what the test sent,
a revoked key is refused everywhere within a second.

Limits count per calendar minute, so a test's throttled requests must fall in one: each runs at once,
and only when a minute began while it ran does it run again, with new keys, early in the new minute
(instead of waiting for a fresh minute whenever it might not fit)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import httpx
import pytest

from deploy.cluster import cluster
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until

pytest.importorskip("polyvox.backends.embedded")
pytestmark = pytest.mark.timeout(600)

ADMIN = "processes-admin-key"
T = TypeVar("T")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def polyvox_keys(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "keys", *args], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def speak(url: str, key: str, text: str) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "wav"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=120)


def usage_of(url: str, name: str) -> dict:
    rows = httpx.get(f"{url}/v1/usage", headers=bearer(ADMIN)).json()["data"]
    return next(row for row in rows if row["key_name"] == name)


def in_one_minute(run: Callable[[int], T]) -> T:
    """`run(attempt)`'s result from an attempt that began and ended in the same calendar minute. One a
    minute began in is run again at once, with keys of its own (`attempt`): it starts early in that
    minute, with most of it ahead."""
    for attempt in range(3):
        minute = time.time() // 60
        result = run(attempt)
        if time.time() // 60 == minute:
            return result
    raise AssertionError("three attempts in a row each had a minute begin while it ran")


def test_two_api_processes_throttle_one_key_serve_another_and_count_both(tmp_path) -> None:
    voices = tmp_path / "voices"
    flags = ("--api-server-count", "2", "--voices-dir", str(voices), "--admin-api-keys", ADMIN,
             "--no-cache-enabled", "--log-level", "warning")  # fmt: skip
    with polyvox_serve(*flags) as (_, url):

        def throttle(attempt: int) -> tuple[int, dict, Counter, int]:
            made = httpx.post(
                f"{url}/admin/keys",
                json={"name": f"slow-{attempt}", "limits": {"requests_per_minute": 2}},
                headers=bearer(ADMIN),
            )
            assert made.status_code == 201, made.text
            slow = made.json()
            fast_key = polyvox_keys("create", f"fast-{attempt}", "--voices-dir", str(voices), "--json")
            fast = json.loads(fast_key)["key"]
            statuses: Counter = Counter()
            served_chars = 0
            for n in range(6):
                text = f"Request number {n}."
                answer = speak(url, slow["key"], text)
                statuses[answer.status_code] += 1
                served_chars += len(text) if answer.status_code == 200 else 0
                if answer.status_code == 429:
                    assert answer.json()["error"]["code"] == "rate_limit_exceeded"
                    assert answer.headers["x-ratelimit-remaining-requests"] == "0"
                assert speak(url, fast, text).status_code == 200  # the other key is served throughout
            return attempt, slow, statuses, served_chars

        attempt, slow, statuses, served_chars = in_one_minute(throttle)
        # two per minute in each of the two processes: at most four served, at least two refused
        assert statuses[429] >= 2 and 2 <= statuses[200] <= 4, statuses
        slow_usage = usage_of(url, f"slow-{attempt}")
        assert (slow_usage["requests"], slow_usage["input_characters"]) == (statuses[200], served_chars)
        assert usage_of(url, f"fast-{attempt}")["requests"] == 6
        assert slow_usage["audio_seconds"] > 0

        assert httpx.delete(f"{url}/admin/keys/{slow['id']}", headers=bearer(ADMIN)).status_code == 200
        # new connections, so both processes answer: each re-reads the key table within half a second
        wait_until(
            lambda: all(speak(url, slow["key"], "Revoked.").status_code == 401 for _ in range(6)),
            "both API processes refuse the revoked key",
        )


def test_two_replicas_share_limits_keys_and_usage_through_redis(tmp_path) -> None:
    flags = ["--admin-api-keys", ADMIN, "--no-cache-enabled"]
    with cluster(tmp_path, flags, replicas=2) as shared:
        state = ("--state-url", shared.redis.url)

        first, second = (replica.url for replica in shared.replicas)

        def share_a_limit(attempt: int) -> tuple[int, dict, dict, list[httpx.Response]]:
            rpm = ("--rpm", "3")
            limited = json.loads(polyvox_keys("create", f"three-a-minute-{attempt}", *rpm, *state, "--json"))
            free = json.loads(polyvox_keys("create", f"free-{attempt}", *state, "--json"))
            answers = [speak((first, second)[n % 2], limited["key"], "Shared limit.") for n in range(5)]
            return attempt, limited, free, answers

        attempt, limited, free, answers = in_one_minute(share_a_limit)
        # one window for both replicas: exactly three served, whichever replica took each
        assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
        assert answers[3].headers["x-ratelimit-limit-requests"] == "3"
        for url in (first, second):
            assert speak(url, free["key"], "Still served.").status_code == 200
        served = sum(a.status_code == 200 for a in answers)
        for url in (first, second):
            assert usage_of(url, f"three-a-minute-{attempt}")["requests"] == served
            assert usage_of(url, f"free-{attempt}")["requests"] == 2

        polyvox_keys("revoke", limited["id"], *state)
        polyvox_keys("revoke", free["id"], *state)
        for url in (first, second, shared.url):
            wait_until(
                lambda url=url: speak(url, free["key"], "Revoked.").status_code == 401,
                f"{url} refuses the revoked key",
            )
