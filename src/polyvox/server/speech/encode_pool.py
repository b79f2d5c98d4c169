"""The threads that resample and encode response audio: one bounded pool beside the event loop, sized
to the machine, shared by every stream of the process."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

import anyio

from polyvox.cores import usable_cores
from polyvox.settings import Settings

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class EncodePool:
    """Runs audio work in at most `threads` worker threads at once, never on the event loop.

    PyAV's codec, resampler and muxer calls release the interpreter lock while FFmpeg works, so these
    threads use several cores. A caller that awaits each call before making the next (one stream's
    chunks) keeps its order; other streams' calls interleave with it.
    """

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"an encode pool needs at least one thread, got {threads}")
        self.threads = threads
        self._limiter = anyio.CapacityLimiter(threads)

    @classmethod
    def from_settings(cls, settings: Settings) -> EncodePool:
        """The pool `settings.encode_threads` asks for: one thread per usable core when unset."""
        return cls(settings.encode_threads or usable_cores())

    async def run(self, work: Callable[[*Ts], T], *args: *Ts) -> T:
        """`work(*args)` in a pool thread; waits for a free thread first. A cancelled caller still
        waits for the call to end, so an encoder is never used by two calls at once."""
        return await anyio.to_thread.run_sync(work, *args, limiter=self._limiter)
