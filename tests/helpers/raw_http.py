"""Clients no HTTP library will play: raw sockets that send part of a request and then stall or leave."""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit

JSON_BODY = b'{"model": "tts-1", "input": "Hello there, how are you?", "voice": "alloy"}'
BOUNDARY = "polyvoxboundary"
MULTIPART_BODY = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\nstalled\r\n'
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="audio_sample"; filename="a.wav"\r\n'
    "Content-Type: audio/wav\r\n\r\nRIFF"
).encode()
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def head(path: str, content_type: str, content_length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: polyvox\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {content_length}\r\n\r\n"
    ).encode()


def partial_request(url: str, path: str, content_type: str, body: bytes, declared: int) -> socket.socket:
    """A connection that sent a whole head declaring `declared` body bytes, then only `body`."""
    assert len(body) < declared
    sock = socket.create_connection(address(url))
    sock.sendall(head(path, content_type, declared) + body)
    return sock


def partial_head(url: str, path: str) -> socket.socket:
    """A connection that sent the first lines of a head and not the blank line that ends it."""
    sock = socket.create_connection(address(url))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: polyvox\r\nContent-Type: application/json\r\n".encode())
    return sock


def read_until_closed(sock: socket.socket, timeout_s: float) -> bytes:
    """Everything the server sends until it closes the connection; socket.timeout (an OSError) if it
    has not closed it within `timeout_s` of the last byte."""
    sock.settimeout(timeout_s)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass  # closed: what came before the reset is the answer
    finally:
        sock.close()
    return received


def status_and_error(answer: bytes) -> tuple[int, dict[str, Any]]:
    """The status code of a raw HTTP/1.1 answer and its JSON body's `error` object."""
    head_part, _, body = answer.partition(b"\r\n\r\n")
    status = int(head_part.split(b" ", 2)[1])
    return status, json.loads(body)["error"]


def header(answer: bytes, name: str) -> str | None:
    """One header of a raw HTTP/1.1 answer (the first of that name), or None."""
    head_part = answer.partition(b"\r\n\r\n")[0].decode("latin-1")
    for line in head_part.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None


def speech_request(text: str) -> bytes:
    """A whole POST /v1/audio/speech for `text` in alloy's voice, closing the connection after."""
    body = json.dumps({"input": text, "voice": "alloy"}).encode()
    head = "POST /v1/audio/speech HTTP/1.1\r\nHost: polyvox\r\nContent-Type: application/json\r\n"
    return f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
