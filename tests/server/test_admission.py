"""Admission control through a real server: a bounded queue answered with 429 + Retry-After past it,
and clients that go away free their slot and stop their synthesis."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from helpers.metrics import ascrape, scrape, value
from polyvox.backends.fake import FakeBackend
from polyvox.server.speech.admission import Admission, Overloaded

SPEECH = "/v1/audio/speech"
LONG = {"input": "a" * 2000, "response_format": "pcm"}  # 40 s of tone


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


def wait_until_sync(check: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def gauges(samples: dict) -> tuple[float, float]:
    return value(samples, "polyvox_requests_in_flight"), value(samples, "polyvox_queue_depth")


def test_requests_past_running_and_queue_get_429_with_retry_after(serve) -> None:
    gate = threading.Event()
    url = serve(FakeBackend(generate_gate=gate), max_concurrent_requests=1, max_queue=1)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            running = asyncio.create_task(
                client.post(SPEECH, json={"input": "first", "response_format": "wav"})
            )
            queued = asyncio.create_task(
                client.post(SPEECH, json={"input": "second", "response_format": "wav"})
            )

            async def full() -> bool:
                return gauges(await ascrape(client, url)) == (1, 1)

            await wait_until(full, "one request running and one queued")
            refused = await client.post(SPEECH, json={"input": "third"})
            assert refused.status_code == 429
            assert int(refused.headers["Retry-After"]) >= 1
            assert refused.json()["error"]["type"] == "rate_limit_error"
            gate.set()
            first, second = await asyncio.gather(running, queued)
            assert (first.status_code, second.status_code) == (200, 200)
            assert gauges(await ascrape(client, url)) == (0, 0)

    asyncio.run(scenario())


def test_closing_a_stream_cancels_synthesis_and_frees_the_slot(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.02)
    url = serve(backend, max_concurrent_requests=1, max_queue=0)
    with httpx.stream(
        "POST", f"{url}{SPEECH}", json={**LONG, "stream_format": "audio"}, timeout=60
    ) as response:
        assert response.status_code == 200
        chunks = response.iter_raw()
        assert next(chunks)
        assert gauges(scrape(url))[0] == 1
        assert backend.active == 1
    wait_until_sync(
        lambda: gauges(scrape(url)) == (0, 0) and backend.active == 0, "slot freed after disconnect"
    )
    assert backend.cancelled_requests == 1
    # the only slot is free again: with no queue, a busy server would answer 429
    assert httpx.post(f"{url}{SPEECH}", json={"input": "next one"}).status_code == 200


def test_closing_an_sse_stream_cancels_synthesis(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.02)
    url = serve(backend, max_concurrent_requests=1, max_queue=0)
    with httpx.stream(
        "POST", f"{url}{SPEECH}", json={**LONG, "stream_format": "sse"}, timeout=60
    ) as response:
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")
        assert backend.active == 1
    wait_until_sync(
        lambda: gauges(scrape(url)) == (0, 0) and backend.active == 0, "slot freed after disconnect"
    )
    assert backend.cancelled_requests == 1


def test_disconnecting_from_a_non_streamed_request_cancels_it(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.02)
    url = serve(backend, max_concurrent_requests=1, max_queue=0)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            pending = asyncio.create_task(client.post(SPEECH, json=LONG))

            async def synthesising() -> bool:
                return backend.active == 1 and gauges(await ascrape(client, url))[0] == 1

            await wait_until(synthesising, "the request is being synthesised")
            pending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pending

            async def freed() -> bool:
                return backend.active == 0 and gauges(await ascrape(client, url)) == (0, 0)

            await wait_until(freed, "slot freed after disconnect")

    asyncio.run(scenario())
    assert backend.cancelled_requests == 1


def test_disconnecting_while_queued_leaves_the_queue(serve) -> None:
    gate = threading.Event()
    backend = FakeBackend(generate_gate=gate)
    url = serve(backend, max_concurrent_requests=1, max_queue=1)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            running = asyncio.create_task(client.post(SPEECH, json={"input": "first"}))

            async def started() -> bool:
                return gauges(await ascrape(client, url)) == (1, 0) and backend.started_requests == 1

            await wait_until(started, "the first request running")  # so "second" is the one queued
            queued = asyncio.create_task(client.post(SPEECH, json={"input": "second"}))

            async def full() -> bool:
                return gauges(await ascrape(client, url)) == (1, 1)

            await wait_until(full, "one running, one queued")
            queued.cancel()

            async def left() -> bool:
                return gauges(await ascrape(client, url)) == (1, 0)

            await wait_until(left, "the queued request left the queue")
            gate.set()
            assert (await running).status_code == 200

    asyncio.run(scenario())
    assert backend.started_requests == 1


# --- the Admission object itself -------------------------------------------------------------------


def test_admission_serves_waiters_first_come_first_served() -> None:
    async def scenario() -> list[int]:
        admission = Admission(max_running=1, max_waiting=3)
        order: list[int] = []
        await admission.acquire()

        async def client(n: int) -> None:
            await admission.acquire()
            order.append(n)
            admission.release()

        tasks = [asyncio.create_task(client(n)) for n in range(3)]
        await asyncio.sleep(0)
        assert admission.waiting == 3
        with pytest.raises(Overloaded):
            await admission.acquire()
        admission.release()
        await asyncio.gather(*tasks)
        assert (admission.running, admission.waiting) == (0, 0)
        return order

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_admission_cancelled_waiter_gives_its_place_back() -> None:
    async def scenario() -> None:
        admission = Admission(max_running=1, max_waiting=1)
        await admission.acquire()
        waiter = asyncio.create_task(admission.acquire())
        await asyncio.sleep(0)
        assert admission.waiting == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert admission.waiting == 0
        admission.release()
        assert admission.running == 0
        await admission.acquire()
        assert admission.running == 1

    asyncio.run(scenario())
