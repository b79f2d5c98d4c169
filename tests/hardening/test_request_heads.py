"""Request heads over 16 KiB on `polyvox serve`: 431 in OpenAI's shape with the connection closed,
whether the head comes in one piece or trickles in, and however large it is (a 1 MiB head gets its
431 too, never a TCP reset); a head under the limit is served. Nothing is logged as an error."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator

import httpx
import pytest

from helpers.raw_http import address, header, read_until_closed, status_and_error
from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

LIMIT = 16 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with polyvox_serve("--no-cache-enabled", "--log-level", "info") as (proc, url):
        yield url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert "Traceback" not in log and "ERROR" not in log, log


def padded(size: int) -> dict[str, str]:
    """A header that makes a GET /v1/models head about `size` bytes long."""
    return {"X-Padding": "a" * (size - 200)}


def assert_431(response: httpx.Response) -> None:
    assert response.status_code == 431, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "headers_too_large")
    assert "16 KiB" in error["message"] and response.headers["connection"] == "close"


def test_a_head_under_the_limit_is_served(server: str) -> None:
    assert httpx.get(f"{server}/v1/models", headers=padded(LIMIT - 1024)).status_code == 200


@pytest.mark.parametrize("size", [LIMIT + 1024, 60 * 1024, 256 * 1024, 1024 * 1024])
def test_a_head_over_the_limit_is_431_with_a_body(server: str, size: int) -> None:
    with httpx.Client(timeout=30) as client:
        assert_431(client.get(f"{server}/v1/models", headers=padded(size)))
        assert client.get(f"{server}/v1/models").status_code == 200  # a new connection is served


def test_a_head_that_trickles_past_the_limit_is_431(server: str) -> None:
    sock = socket.create_connection(address(server))
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: polyvox\r\n")
    for _ in range(LIMIT // 1024 + 2):
        sock.sendall(b"X-Padding: " + b"a" * 1024 + b"\r\n")
    answer = read_until_closed(sock, 30)
    status, error = status_and_error(answer)
    assert (status, error["code"]) == (431, "headers_too_large"), answer
    assert header(answer, "connection") == "close"
