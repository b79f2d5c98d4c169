"""Noticing an HTTP client that has gone away, so work done only for it (waiting for an admission
slot, say) is cancelled instead of finished."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


async def wait_for_disconnect(request: Request) -> None:
    """Returns when the client has gone (call only once the request body has been read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """Run `work`, cancelling it and raising ClientGone if the client disconnects first.

    Work that finishes all the same (a cancellation can come too late: an admission slot taken in the
    same turn of the loop) returns its result as usual, so the caller releases what it holds: raising
    ClientGone then would lose it (the slot would never be given back)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
    if not task.done():
        await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        raise ClientGone()
    return task.result()
