"""A key's `max_streams` across replicas (Redis): a replica killed with -9 mid-stream leaves a lease
no one renews, so the key streams again through another replica within the lease's 15 s (not the hour
it was), and each refusal's Retry-After says how long the dead lease has left (checked against the lease's
expiry in Redis, so a loaded machine that answers late cannot fail it)."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from redis import Redis

from helpers.metrics import scrape
from helpers.raw_http import address
from helpers.redis_server import private_redis
from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.tenancy.limits import STREAM_LEASE_S, STREAM_RENEW_S
from polyvox.settings import Settings

LONG_TEXT = " ".join(["This sentence keeps the stream busy for a good while."] * 60)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@contextlib.contextmanager
def slow_reader(url: str, key: str) -> Iterator[socket.socket]:
    """A long streamed answer read by a client with a tiny receive window, so the server stays in the
    middle of sending it (a fast engine would otherwise be done before the replica is killed)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address(url))
    body = json.dumps({"model": "tts-1", "voice": "alloy", "input": LONG_TEXT, "response_format": "pcm"})
    head = (
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: polyvox\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body.encode())
    try:
        yield sock
    finally:
        sock.close()


def dead_lease_expiry(redis_url: str) -> float:
    """When the one stream lease in Redis lapses (wall clock): the killed replica's, which no one renews."""
    client = Redis.from_url(redis_url)
    try:
        (streams,) = client.keys("polyvox:limits:*:streams")
        ((_, expiry),) = client.zrange(streams, 0, -1, withscores=True)
    finally:
        client.close()
    return expiry


def speech(url: str, key: str) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": "hello", "response_format": "wav"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=60)


def test_a_replica_killed_mid_stream_frees_the_keys_stream_within_the_lease(tmp_path) -> None:
    with private_redis() as redis:
        made = subprocess.run(
            [sys.executable, "-m", "polyvox.cli", "keys", "create", "one", "--max-streams", "1", "--json"]
            + ["--state-url", redis.url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        key = json.loads(made.stdout)["key"]
        flags = ("--state-url", redis.url, "--voices-dir", str(tmp_path / "a"), "--log-level", "warning")
        settings = Settings(state_url=redis.url, voices_dir=tmp_path / "b")
        with (
            running_server(create_app(settings, FakeBackend())) as other,
            polyvox_serve(*flags) as (replica, url),
        ):
            with slow_reader(url, key) as held:  # a stream the replica about to die is sending
                assert held.recv(12) == b"HTTP/1.1 200"
                assert speech(other, key).status_code == 429  # the key's one stream is in use
                replica.send_signal(signal.SIGKILL)
                replica.wait()
            expiry = dead_lease_expiry(redis.url)  # no one renews it now
            answers = []  # each refusal: (the lease's time left as it was asked, Retry-After, once answered)
            while True:
                before = expiry - time.time()
                answer = speech(other, key)
                after = expiry - time.time()
                if answer.status_code != 429:
                    break
                answers.append((before, int(answer.headers["retry-after"]), after))
                assert after > -10, answers  # the key streams again within the lease (and some slack)
                time.sleep(1.0 if after > 6 else 0.25)  # more often in the lease's last seconds
            assert answer.status_code == 200, answer.text
            assert answer.content[:4] == b"RIFF"
            # Redis calls that failed on the other replica (it counts locally after one times out)
            problems = {key: n for key, n in scrape(other).items() if key[0] == "polyvox_state_errors_total"}
            # While the lease is renewed on time (more than 5 s left) a stream may end at any moment: 1 s.
            # In its last seconds, once it missed its renewals, the seconds it has left.
            for before, retry_after, after in answers:
                assert 1 <= retry_after <= STREAM_LEASE_S, (answers, problems)
                if after >= STREAM_LEASE_S - 2 * STREAM_RENEW_S:
                    assert retry_after == 1, (answers, problems)
                elif before < STREAM_LEASE_S - 2 * STREAM_RENEW_S and after > 1:
                    assert math.ceil(after) <= retry_after <= math.ceil(before), (answers, problems)
            last_seconds = [a for a in answers if a[0] < STREAM_LEASE_S - 2 * STREAM_RENEW_S and a[2] > 1]
            assert last_seconds, (answers, problems)  # some were asked then, and said more than 1 s
