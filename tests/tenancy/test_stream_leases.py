"""A key's `max_streams` across replicas (Redis): a replica killed with -9 mid-stream leaves a lease
no one renews, so the key streams again through another replica within the lease's 15 s (not the hour
it was), and each refusal's Retry-After says how long the dead lease has left."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from helpers.raw_http import address
from helpers.redis_server import private_redis
from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.tenancy.limits import STREAM_LEASE_S
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
                killed_at = time.monotonic()
            statuses = []
            while (answer := speech(other, key)).status_code == 429:
                retry_after = int(answer.headers["retry-after"])
                assert 1 <= retry_after <= STREAM_LEASE_S
                statuses.append(retry_after)
                assert time.monotonic() - killed_at < STREAM_LEASE_S + 10, statuses
                time.sleep(min(retry_after, 1.0))
            assert answer.status_code == 200, answer.text
            assert answer.content[:4] == b"RIFF"
            assert max(statuses) > 1, statuses  # once the lease missed its renewals, it said how long
