"""SIGTERM while a Wyoming answer streams (`polyvox serve`, the embedded voice): the answer runs to its
`audio-stop` as an HTTP request would, a new Wyoming request meanwhile gets an `error` event
`shutting_down`, and the process exits 0."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.tts import Synthesize

from helpers.serve_process import free_port, polyvox_serve

pytest.importorskip("piper")

# A minute of speech: seconds of synthesis still to come when the SIGTERM is sent, where the drain
# and the refusal below take a fraction of one.
LONG = " ".join(f"This is sentence number {n} of a long answer read aloud." for n in range(20))


async def receive(client: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(client.read_event(), 60)
    assert event is not None, "the server closed the connection"
    return event


def test_sigterm_lets_a_wyoming_answer_finish_and_refuses_new_ones() -> None:
    port = free_port()
    with polyvox_serve("--wyoming-port", str(port), "--no-cache-enabled") as (proc, url):

        def draining() -> bool:
            try:
                return httpx.get(f"{url}/ready").status_code == 503
            except httpx.TransportError:
                return False

        async def scenario() -> int:
            async with (
                AsyncTcpClient("127.0.0.1", port) as first,
                AsyncTcpClient("127.0.0.1", port) as second,
            ):
                await first.write_event(Synthesize(text=LONG).event())
                assert (await receive(first)).type == "audio-start"
                size = len((await receive(first)).payload or b"")
                proc.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + 30
                while not await asyncio.to_thread(draining):
                    assert time.monotonic() < deadline, "the drain never began"
                await second.write_event(Synthesize(text="Too late.").event())
                assert Error.from_event(await receive(second)).code == "shutting_down"
                while (event := await receive(first)).type == "audio-chunk":
                    size += len(event.payload or b"")
                assert event.type == "audio-stop"
                return size

        size = asyncio.run(scenario())
        assert proc.wait(timeout=60) == 0
    assert size / 2 / 22050 > 50, size  # the whole answer (a minute), not its first chunk
