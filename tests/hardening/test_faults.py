"""Faults the server must survive: the engine failing mid-batch (tone engine and the batching VoxCPM2
engine), clients resetting connections mid-stream, bodies past the limits (chunked ones too), and a
deadline while streaming SSE. Each checks that nothing was lost and the server recovered."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time

import httpx
import pytest

from helpers.audio import pcm_samples
from helpers.metrics import scrape, value
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.app_state import app_state
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"
TEXT = "a sentence of fifty characters, more or less, ok!!"  # 1.0 s of tone at 24 kHz


def wait_until(condition, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def assert_recovered(url: str, backend: FakeBackend | None = None) -> None:
    """Nothing left running, and the server still answers a normal request in full."""
    wait_until(lambda: value(scrape(url), "polyvox_requests_in_flight") == 0, "admission slots freed")
    if backend is not None:
        wait_until(lambda: backend.active == 0, "engine generations closed")
    assert httpx.get(f"{url}/ready").status_code == 200
    response = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"})
    assert response.status_code == 200
    assert pcm_samples(response.content).size == 24000


def test_engine_failing_mid_batch_fails_only_those_requests(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.01)
    url = serve(backend, max_concurrent_requests=8)

    async def one(client: httpx.AsyncClient, i: int) -> tuple[int, str, bytes | list]:
        fail = i % 3 == 0
        text = TEXT + (" [fail]" if fail else "")
        mode = ("whole", "audio", "sse")[i % 3 if not fail else (i // 3) % 3]
        body = {"input": text, "response_format": "pcm"}
        if mode == "whole":
            body["stream"] = False
        else:
            body["stream_format"] = mode
        try:
            async with client.stream("POST", f"{url}{SPEECH}", json=body) as response:
                data = b"".join([part async for part in response.aiter_bytes()])
                return response.status_code, mode, data
        except httpx.RemoteProtocolError:  # a chunked stream cut short: the engine failed after headers
            return -1, mode, b""

    async def main():
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(*(one(client, i) for i in range(18)))

    results = asyncio.run(main())
    for i, (status, mode, data) in enumerate(results):
        if i % 3 == 0:  # asked to fail: a 500, a cut transfer, or an SSE error event, never a "complete" file
            if mode == "sse":
                events = [
                    json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")
                ]
                assert events[-1]["type"] == "error" and events[-1]["error"]["type"] == "server_error"
            elif mode == "whole":
                assert status == 500 and json.loads(data)["error"]["code"] == "engine_error"
            else:
                assert status in (-1, 500)
        else:
            assert status == 200, (i, mode, data[:200])
            if mode == "sse":
                events = [
                    json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")
                ]
                assert events[-1]["type"] == "speech.audio.done"
            else:
                assert pcm_samples(data).size == 24000
    assert_recovered(url, backend)


def _reset_mid_stream(url: str, body: dict) -> bytes:
    """POST with a raw socket, read the first bytes of the streamed answer, then reset (RST) the socket."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        f"POST {SPEECH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    received = sock.recv(4096)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    return received


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_clients_resetting_mid_stream_free_their_requests(serve, stream_format: str) -> None:
    backend = FakeBackend(chunk_delay_s=0.05)
    url = serve(backend, max_concurrent_requests=4)
    body = {"input": "x" * 500, "response_format": "mp3", "stream_format": stream_format}  # 10 s of tone
    for _ in range(6):
        assert _reset_mid_stream(url, body).startswith(b"HTTP/1.1 200")
    wait_until(lambda: backend.cancelled_requests == 6, "every reset request cancelled in the engine")
    assert backend.started_requests == 6
    assert_recovered(url, backend)


def test_reset_while_queued_leaves_the_queue(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.05)
    url = serve(backend, max_concurrent_requests=1, max_queue=8)
    # the one running request takes 30 s of the fake's paced chunks (closed, so cancelled, at the end of
    # the block): the queue's three rounds have it running on any machine
    with httpx.stream(
        "POST", f"{url}{SPEECH}", json={"input": "x" * 3000, "stream_format": "audio"}
    ) as running:
        pieces = running.iter_bytes()  # kept referenced: dropping the iterator closes the response
        next(pieces)
        for _ in range(3):
            host, port = url.removeprefix("http://").split(":")
            payload = json.dumps({"input": TEXT}).encode()
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                f"POST {SPEECH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            wait_until(lambda: value(scrape(url), "polyvox_queue_depth") == 1, "the request is queued")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            wait_until(lambda: value(scrape(url), "polyvox_queue_depth") == 0, "the queue place is freed")
    assert backend.started_requests == 1
    assert_recovered(url, backend)


def _chunked(data: bytes, piece: int = 4096):
    for start in range(0, len(data), piece):
        yield data[start : start + piece]


def test_chunked_json_body_past_the_limit_is_413(serve) -> None:
    url = serve(max_request_bytes=4096)
    body = json.dumps({"input": "a" * 10_000}).encode()
    response = httpx.post(
        f"{url}{SPEECH}", content=_chunked(body), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"
    assert_recovered(url)


def test_chunked_multipart_body_past_the_limit_is_413(serve) -> None:
    url = serve(max_request_bytes=8192)
    request = httpx.Request(
        "POST", f"{url}{SPEECH}", data={"input": TEXT}, files={"speaker_wav": ("a.wav", b"\0" * 50_000)}
    )
    body = request.read()
    response = httpx.post(
        f"{url}{SPEECH}", content=_chunked(body), headers={"Content-Type": request.headers["Content-Type"]}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert_recovered(url)


def test_upload_past_its_own_limit_is_413(serve) -> None:
    url = serve(max_upload_bytes=2048)
    response = httpx.post(
        f"{url}{SPEECH}", data={"input": TEXT}, files={"custom_voice_file": ("a.wav", b"\0" * 10_000)}
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "upload_too_large"
    assert response.json()["error"]["param"] == "custom_voice_file"


def test_input_past_the_character_limit_is_refused_before_the_engine(serve) -> None:
    backend = FakeBackend()
    url = serve(backend, max_input_chars=100)
    response = httpx.post(f"{url}{SPEECH}", json={"input": "a" * 101})
    assert response.status_code == 400 and response.json()["error"]["param"] == "input"
    assert backend.started_requests == 0


def test_full_queue_answers_429_with_retry_after(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.05)
    url = serve(backend, max_concurrent_requests=1, max_queue=0)
    # the one running request takes 30 s of the fake's paced chunks (closed, so cancelled, at the end of
    # the block): the queue's three rounds have it running on any machine
    with httpx.stream(
        "POST", f"{url}{SPEECH}", json={"input": "x" * 3000, "stream_format": "audio"}
    ) as running:
        pieces = running.iter_bytes()  # kept referenced: dropping the iterator closes the response
        next(pieces)
        refused = httpx.post(f"{url}{SPEECH}", json={"input": TEXT})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert_recovered(url, backend)


def test_deadline_while_streaming_sse_ends_with_an_error_event(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.05)
    url = serve(backend, request_timeout_s=1.5)
    response = httpx.post(f"{url}{SPEECH}", json={"input": "x" * 500, "stream_format": "sse"})
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "timeout"
    assert_recovered(url, backend)


def test_voxcpm2_step_failure_fails_its_requests_and_the_engine_keeps_serving() -> None:
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.core.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    # a small KV pool: the default on a CPU (cpu_kv_cache_bytes, 2 GiB) is seconds of zeroing per engine
    model = VoxCPM2.random("tiny", device="cpu", dtype="float32")
    backend = VoxCPMBackend(model, BatchingConfig(num_kv_blocks=256), max_patches=6)
    app = create_app(Settings(max_concurrent_requests=8), backend)
    with running_server(app) as url:
        runner = backend._step_loop.core.runner
        real_run = runner.run
        faults = {"left": 1}

        def faulty_run(chunks):
            if faults["left"] and any(c.seq.num_computed > 0 for c in chunks):  # mid-generation
                faults["left"] -= 1
                raise RuntimeError("injected device fault")
            return real_run(chunks)

        runner.run = faulty_run
        with httpx.Client(timeout=60) as client:
            whole = {"input": "Hello there.", "response_format": "pcm", "stream": False}
            failed = client.post(f"{url}{SPEECH}", json=whole)
            assert failed.status_code == 500 and failed.json()["error"]["type"] == "server_error"
            assert faults["left"] == 0
            assert client.get(f"{url}/ready").status_code == 200
            after = [
                client.post(f"{url}{SPEECH}", json={"input": f"Take {i}.", "response_format": "wav"})
                for i in range(3)
            ]
        assert all(r.status_code == 200 and len(r.content) > 44 for r in after)
        assert backend.stats().kv_blocks_used == 0
        assert value(scrape(url), "polyvox_requests_in_flight") == 0


def test_control_characters_in_input_are_spoken_as_spaces(embedded_url) -> None:
    from helpers.audio import decode

    response = httpx.post(
        f"{embedded_url}{SPEECH}", json={"input": "Hello\x00 world\x1b.", "response_format": "wav"}
    )
    assert response.status_code == 200
    samples, rate = decode(response.content)
    assert samples.size / rate > 0.3
    only_controls = httpx.post(f"{embedded_url}{SPEECH}", json={"input": "\x00\x01\x7f"})
    assert only_controls.status_code == 400 and only_controls.json()["error"]["code"] == "empty_input"


def test_waiting_in_the_queue_past_the_deadline_is_504() -> None:
    backend = FakeBackend()
    app = create_app(Settings(max_concurrent_requests=1, max_queue=4, request_timeout_s=1.0), backend)
    admission = app_state(app).service.admission
    with running_server(app) as url:
        admission.running = 1  # the one slot is held, as by a stream whose client stopped reading
        queued = httpx.post(f"{url}{SPEECH}", json={"input": "queued"}, timeout=30)
        assert queued.status_code == 504 and queued.json()["error"]["code"] == "timeout"
        assert backend.started_requests == 0 and admission.waiting == 0
        admission.release()
        assert_recovered(url, backend)
