"""The admission queue is fair across keys: with the server's queue full of one key's requests, a
request of another key takes the newest of them's place (which is answered 429) instead of being
refused, and a slot goes to each key in turn. Through a real server with named keys."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helpers.metrics import scrape, value
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.speech.admission import Admission, Overloaded
from polyvox.settings import Settings

ADMIN = "fair-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def wait_for(check, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def test_a_key_with_one_request_is_queued_when_another_key_filled_the_queue(tmp_path) -> None:
    gate = threading.Event()
    settings = Settings(voices_dir=tmp_path, admin_api_keys=[ADMIN], max_concurrent_requests=1, max_queue=3)
    with running_server(create_app(settings, FakeBackend(generate_gate=gate))) as url:
        keys = {}
        for name in ("busy", "quiet"):
            made = httpx.post(f"{url}/admin/keys", json={"name": name}, headers=bearer(ADMIN))
            keys[name] = made.json()["key"]

        def speak(key: str, n: int) -> int:
            body = {"model": "tts-1", "voice": "alloy", "input": f"request {n}", "response_format": "wav"}
            return httpx.post(
                f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=60
            ).status_code

        queued = lambda: value(scrape(url), "polyvox_queue_depth")  # noqa: E731
        with ThreadPoolExecutor(8) as pool:
            busy = [pool.submit(speak, keys["busy"], n) for n in range(4)]  # one runs, three wait
            wait_for(lambda: queued() == 3, "the queue full of the busy key's requests")
            quiet = pool.submit(speak, keys["quiet"], 0)
            wait_for(lambda: sum(f.done() for f in busy) == 1, "the busy key's newest request refused")
            assert queued() == 3
            gate.set()
            assert quiet.result() == 200
            assert sorted(f.result() for f in busy) == [200, 200, 200, 429]


def test_a_free_slot_goes_to_each_key_in_turn() -> None:
    async def run() -> list[str]:
        admission = Admission(max_running=1, max_waiting=8)
        await admission.acquire("a")
        order: list[str] = []

        async def wait(tenant: str) -> None:
            await admission.acquire(tenant)
            order.append(tenant)

        tasks = [asyncio.create_task(wait(t)) for t in ("a", "a", "a", "b", "c")]
        await asyncio.sleep(0)
        for _ in tasks:
            admission.release()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(run()) == ["a", "b", "c", "a", "a"]


def test_a_key_with_its_share_of_a_full_queue_is_refused() -> None:
    async def run() -> None:
        admission = Admission(max_running=1, max_waiting=2)
        await admission.acquire("a")
        first = asyncio.create_task(admission.acquire("a"))
        second = asyncio.create_task(admission.acquire("b"))
        await asyncio.sleep(0)
        with pytest.raises(Overloaded):
            await admission.acquire("b")  # a and b have one place each: fair already
        admission.release()
        admission.release()
        await asyncio.gather(first, second)

    asyncio.run(run())
