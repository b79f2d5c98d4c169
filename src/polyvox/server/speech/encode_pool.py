"""The threads that resample and encode response audio: one bounded pool beside the event loop, sized
to the machine, shared by every stream of the process."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

from polyvox.runtime.cpus import usable_cpus
from polyvox.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class EncodePool:
    """Runs audio work on `threads` worker threads (named polyvox-encode), never on the event loop.

    PyAV's codec, resampler and muxer calls release the interpreter lock while FFmpeg works, so these
    threads use several cores. Calls start in the order they were made; a caller that awaits each call
    before making the next (one stream's chunks) keeps its order, and other streams' calls interleave.
    A plain executor rather than `anyio.to_thread`: it hands a call over in a fraction of the event
    loop's time, which at 1,600 chunks a second is most of what the loop spends on encoding.
    """

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"an encode pool needs at least one thread, got {threads}")
        self.threads = threads
        # Threads start on first use; they end at close(), or when the pool is collected.
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="polyvox-encode")

    @classmethod
    def from_settings(cls, settings: Settings) -> EncodePool:
        """The pool `settings.encode_threads` asks for: one thread per usable core when unset."""
        return cls(settings.encode_threads or usable_cpus())

    def close(self) -> None:
        """Stop the threads once the work already handed over is done; calls still waiting are dropped."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def release(self, close: Callable[[], object]) -> None:
        """Run `close` on a pool thread without waiting for it: what frees a response's audio work when
        the response ends, however it ends. Unlike `run`, it cannot be dropped by a cancellation (a cut
        stream's cleanup is what a cancellation leads to), and the event loop never waits for it (it
        may wait in turn for the stream's last chunk, still encoding). A closed pool runs it here."""
        try:
            future = self._executor.submit(close)
        except RuntimeError:  # the pool was closed: the process is stopping
            _logged(close)
            return
        future.add_done_callback(_log_failure)

    async def run(self, work: Callable[[*Ts], T], *args: *Ts) -> T:
        """`work(*args)` on a pool thread, after the calls already waiting. A caller cancelled before
        the call starts drops it (a client gone costs no encoding); once started it runs to its end
        while the caller moves on, so a caller must not touch what it passed after cancelling."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(work, *args))


def _logged(close: Callable[[], object]) -> None:
    try:
        close()
    except Exception:
        log.exception("releasing a response's audio failed")


def _log_failure(future: Future) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("releasing a response's audio failed", exc_info=exc)
