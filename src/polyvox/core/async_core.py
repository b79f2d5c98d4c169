"""The async front end: `async for out in engine.generate(...)` over an `EngineCore` stepping in a thread.

The thread runs the engine's one step loop (`step_loop.run_steps`, which the engine process runs too),
with this object as its transport. It never touches the event loop except to hand each step's outputs
over in one `call_soon_threadsafe`; every request has its own unbounded output queue, so a slow client
only accumulates chunks (at most `max_len` of them) and never holds the batch back. Requests and
cancellations reach the loop through a thread-safe inbox and take effect before the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from polyvox.core.core import BatchingStats, EngineCore, StepFailed, StepOutput
from polyvox.core.sequence import PromptLike, SamplingParams
from polyvox.core.step_loop import MAX_CONSECUTIVE_FAILURES, run_steps

__all__ = ["MAX_CONSECUTIVE_FAILURES", "AsyncEngineCore", "EngineCoreDead", "RequestFailedError"]

log = logging.getLogger(__name__)


class EngineCoreDead(RuntimeError):
    """The step loop failed; the request cannot complete."""


class RequestFailedError(EngineCoreDead):
    """A step running this request failed; the engine itself goes on serving the others."""


@dataclass(slots=True)
class _Add:
    prompt: PromptLike
    params: SamplingParams
    request_id: str
    sink: asyncio.Queue
    loop: asyncio.AbstractEventLoop
    handle: list  # the engine thread stores the sequence id here


@dataclass(slots=True)
class _Abort:
    handle: list


class AsyncEngineCore:
    def __init__(self, core: EngineCore, on_exit: Callable[[], None] | None = None):
        """`on_exit`: called on the step loop's thread once the loop has ended (`running` is false by
        then), whether it failed or was stopped."""
        self.core = core
        self._on_exit = on_exit
        self._exited = threading.Event()
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._sinks: dict[int, tuple[asyncio.Queue, asyncio.AbstractEventLoop]] = {}
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="polyvox-batching", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._inbox.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._exited.is_set()

    def stats(self) -> BatchingStats:
        return self.core.stats()

    async def generate(
        self, prompt: PromptLike, params: SamplingParams, request_id: str = ""
    ) -> AsyncGenerator[StepOutput, None]:
        """Yield the request's patches as they are made; closing early cancels it in the engine."""
        if not self.running:
            reason = f"engine failed: {self._error!r}" if self._error else "engine is not running"
            raise EngineCoreDead(reason)
        sink: asyncio.Queue = asyncio.Queue()
        handle: list = []
        self._inbox.put(_Add(prompt, params, request_id, sink, asyncio.get_running_loop(), handle))
        finished = False
        try:
            while True:
                item = await sink.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finished:
                    finished = True
                    return
        finally:
            if not finished:
                self._inbox.put(_Abort(handle))

    # ------------------------------------------------------------------ engine thread

    def _loop(self) -> None:
        try:
            run_steps(self.core, self)
        except BaseException as exc:  # the loop is dead: every waiting request learns why
            log.exception("engine step loop failed")
            self._error = exc
            self._fail_all(EngineCoreDead(f"engine failed: {exc!r}"))
        else:
            self._fail_all(EngineCoreDead("engine stopped"))
        finally:
            self._exited.set()
            if self._on_exit is not None:
                self._on_exit()

    # the transport `run_steps` drives

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def take(self, wait: bool) -> None:
        while True:
            try:
                msg = self._inbox.get(timeout=0.5) if wait else self._inbox.get_nowait()
            except queue.Empty:
                return
            wait = False
            if msg is None:  # stop() was called
                return
            if isinstance(msg, _Add):
                self._add(msg)
            elif msg.handle:
                seq_id = msg.handle[0]
                self._sinks.pop(seq_id, None)
                self.core.abort(seq_id)

    def idle(self) -> None:
        pass

    def fail(self, failure: StepFailed) -> None:
        self._fail(failure.seq_ids, RequestFailedError(str(failure)))

    def _add(self, msg: _Add) -> None:
        try:
            seq = self.core.add_request(msg.prompt, msg.params, msg.request_id)
        except Exception as exc:
            msg.loop.call_soon_threadsafe(msg.sink.put_nowait, exc)
            return
        msg.handle.append(seq.seq_id)
        self._sinks[seq.seq_id] = (msg.sink, msg.loop)

    def publish(self, outputs: list[StepOutput]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for out in outputs:
            target = self._sinks.get(out.seq_id)
            if target is None:
                continue
            if out.finished:
                del self._sinks[out.seq_id]
            by_loop.setdefault(target[1], []).append((target[0], out))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # that event loop is closed; its requests are gone
                for _, out in items:
                    if not out.finished:
                        self.core.abort(out.seq_id)

    def _fail(self, seq_ids: list[int], exc: BaseException) -> None:
        for seq_id in seq_ids:
            target = self._sinks.pop(seq_id, None)
            if target is not None:
                with contextlib.suppress(RuntimeError):
                    target[1].call_soon_threadsafe(target[0].put_nowait, exc)

    def _fail_all(self, exc: BaseException) -> None:
        for seq_id, (sink, loop) in list(self._sinks.items()):
            self.core.abort(seq_id)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(sink.put_nowait, exc)
        self._sinks.clear()
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(msg, _Add):
                with contextlib.suppress(RuntimeError):
                    msg.loop.call_soon_threadsafe(msg.sink.put_nowait, exc)


def _deliver(items: list[tuple[asyncio.Queue, StepOutput]]) -> None:
    for sink, out in items:
        sink.put_nowait(out)
