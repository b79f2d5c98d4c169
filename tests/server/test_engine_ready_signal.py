"""A request waiting for a restarting engine goes on when the engine announces it is back, within a few
turns of the event loop, not at a polling interval's next tick; past its deadline it is refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.app_state import app_state
from polyvox.server.errors import APIError
from polyvox.settings import Settings

LOOP_TURNS = 5  # far fewer than a timer needs: a zero sleep is one turn of the loop


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_waiting_request_goes_on_as_soon_as_the_engine_is_back() -> None:
    backend = FakeBackend()
    state = app_state(create_app(Settings(request_timeout_s=60), backend))
    events: list[str] = []

    async def scenario() -> None:
        await backend.start()
        state.supervisor.served = True
        backend.die()

        async def request() -> None:
            await state.service._engine_ready(time.perf_counter())
            events.append("request goes on")

        waiting = asyncio.create_task(request())
        await _turns(LOOP_TURNS * 4)
        events.append("engine back")
        await backend.start()
        await _turns(LOOP_TURNS)
        events.append("a few loop turns later")
        await waiting

    asyncio.run(scenario())
    assert events == ["engine back", "request goes on", "a few loop turns later"]


def test_a_request_waits_for_the_engine_only_until_its_deadline() -> None:
    backend = FakeBackend()
    state = app_state(create_app(Settings(request_timeout_s=0.2), backend))

    async def scenario() -> None:
        await backend.start()
        state.supervisor.served = True
        backend.die()
        await state.service._engine_ready(time.perf_counter())

    with pytest.raises(APIError) as refused:
        asyncio.run(scenario())
    assert refused.value.status_code == 503 and refused.value.code == "engine_not_ready"
