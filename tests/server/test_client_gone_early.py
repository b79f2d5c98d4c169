"""A client gone by the time its request takes an admission slot gives the slot back, however many
such clients come. The slot is taken in the same turn of the event loop as the disconnect is noticed,
so the cancellation comes too late: that slot used to be lost (ClientGone raised over it), and after
`max_concurrent_requests` of them the server answered nobody. The real `Admission` and
`until_disconnect`, with a client that has already gone (an ASGI receive that says so).

Through a real server the same loss shows when clients leave whole answers at the wrong moment
(tests/hardening/test_cut_streams.py, whole answers left early), but only now and then."""

from __future__ import annotations

import asyncio

from polyvox.server.speech.admission import Admission
from polyvox.server.speech.disconnect import ClientGone, until_disconnect


class GoneClient:
    """The request of a client that disconnected after sending it: its next ASGI message says so."""

    async def receive(self) -> dict:
        return {"type": "http.disconnect"}


def test_a_slot_taken_as_the_client_is_found_gone_is_not_lost() -> None:
    async def scenario() -> tuple[int, int]:
        admission = Admission(max_running=2, max_waiting=4)
        outcomes = 0
        for _ in range(8):  # four times the slots
            try:
                await until_disconnect(GoneClient(), asyncio.wait_for(admission.acquire(), 10))
            except ClientGone:
                continue  # nothing taken
            outcomes += 1
            admission.release()  # taken: its caller gives it back, as the speech route does
        return outcomes, admission.running

    taken, still_running = asyncio.run(scenario())
    assert still_running == 0
    assert taken > 0  # the slots were taken before the disconnect was acted on, and returned


def test_work_cancelled_in_time_is_client_gone() -> None:
    async def scenario() -> None:
        started = asyncio.Event()

        async def long_work() -> None:
            started.set()
            await asyncio.sleep(60)

        try:
            await until_disconnect(GoneClient(), long_work())
        except ClientGone:
            assert started.is_set()
            return
        raise AssertionError("work that had not finished was not cancelled")

    asyncio.run(scenario())
