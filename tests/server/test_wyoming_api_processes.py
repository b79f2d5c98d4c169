"""`polyvox serve --api-server-count 2 --wyoming-port P` (the embedded voice): every API process
listens on the Wyoming port, and concurrent Wyoming clients are all answered."""

from __future__ import annotations

import asyncio

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

from helpers.serve_process import free_port, polyvox_serve

pytest.importorskip("piper")


async def spoken_bytes(port: int) -> int:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text="Hello from two processes.").event())
        size = 0
        while (event := await asyncio.wait_for(client.read_event(), 60)).type != "audio-stop":
            assert event.type in ("audio-start", "audio-chunk"), event
            size += len(event.payload or b"")
        return size


def test_every_api_process_serves_the_wyoming_port() -> None:
    port = free_port()
    flags = ("--api-server-count", "2", "--wyoming-port", str(port), "--no-cache-enabled")
    with polyvox_serve(*flags) as (proc, _):

        async def clients() -> list[int]:
            return await asyncio.gather(*(spoken_bytes(port) for _ in range(6)))

        sizes = asyncio.run(clients())
        proc.terminate()
        proc.wait(timeout=60)
        log = proc.stdout.read()
    assert all(size > 22050 * 2 for size in sizes), sizes  # more than a second of 22.05 kHz PCM each
    listening = [
        line for line in log.splitlines() if f"Wyoming TTS (Home Assistant) on tcp://127.0.0.1:{port}" in line
    ]
    assert len(listening) == 2, log
