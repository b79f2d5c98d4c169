"""`EngineClient`: the API server's side of one engine process (one data-parallel rank). It spawns the
process, talks to it over a ZeroMQ DEALER socket (the engine's ROUTER tells clients apart, so more than
one API process could share an engine), hands each request's patches to that request's own queue, and
watches the process: when it dies, only the requests it was running fail (`EngineDied`, a BackendError),
and it is started again with a growing pause between failed tries.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.util  # registers its exit handler before ours, so ours runs first
import os
from collections.abc import AsyncGenerator
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
import zmq
import zmq.asyncio

from polyvox.backends.base import PromptCacheStats, SynthesisRequest
from polyvox.backends.errors import BackendError, BackendInputError, BackendOverloaded
from polyvox.batching.core import BatchingStats
from polyvox.engine_core import messages as m
from polyvox.engine_core import process_main
from polyvox.engine_core.model_spec import ModelSpec
from polyvox.engine_core.options import WorkerOptions
from polyvox.logs import LogFormat
from polyvox.startup import STAGES

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_S = 10.0  # how long a stopping engine may take to exit before it is killed
RESTART_BACKOFF_S = (0.5, 30.0)  # first and longest pause before starting a dead engine again


class EngineDied(BackendError):
    """The engine process serving the request died (killed, out of memory, a device error)."""


class EngineStartFailed(RuntimeError):
    """The engine process could not start (its message says why)."""


class EngineClient:
    def __init__(
        self,
        rank: int,
        spec: ModelSpec,
        options: WorkerOptions,
        socket_dir: str,
        logging_setup: tuple[str, LogFormat] = ("warning", "text"),
    ) -> None:
        self.rank = rank
        self.spec = spec
        self.options = options
        self.address = f"ipc://{socket_dir}/engine-{rank}.sock"
        self.logging_setup = logging_setup
        self.process: BaseProcess | None = None
        self.handshake: m.Ready | None = None
        self.stats: BatchingStats | None = None
        self.restarts = 0
        self._prompt_stats = PromptCacheStats()
        self._prompt_stats_before = PromptCacheStats()  # of the processes that died, summed
        self._socket: zmq.asyncio.Socket | None = None
        self._tasks: list[asyncio.Task] = []
        self._requests: dict[int, asyncio.Queue] = {}
        self._keys = itertools.count()
        self._calls: dict[int, asyncio.Future] = {}
        self._greeting: asyncio.Future | None = None
        self._stage: str | None = None
        self._stopping = False
        self._restarting: asyncio.Task | None = None

    # ------------------------------------------------------------------ state

    @property
    def up(self) -> bool:
        return self.handshake is not None

    @property
    def load(self) -> int:
        """Requests sent to this engine and not finished (its running and waiting ones)."""
        return len(self._requests)

    def prompt_cache_stats(self) -> PromptCacheStats:
        now, before = self._prompt_stats, self._prompt_stats_before
        return PromptCacheStats(now.encodes + before.encodes, now.hits + before.hits)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Spawn the engine process and wait for its handshake; EngineStartFailed if it cannot start."""
        self._stopping = False
        await self._spawn()

    async def _spawn(self) -> None:
        context = multiprocessing.get_context("spawn")
        level, fmt = self.logging_setup
        process = context.Process(
            target=process_main.run,
            args=(self.spec, self.options, self.address, os.getpid(), level, fmt),
            name=f"polyvox-engine-{self.rank}",
            daemon=True,
        )
        await asyncio.to_thread(process.start)
        _LIVE.add(process)
        self.process = process
        socket = zmq.asyncio.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.SNDHWM, 0)  # sending never waits on a busy engine
        socket.setsockopt(zmq.RCVHWM, 0)
        socket.connect(self.address)
        self._socket = socket
        loop = asyncio.get_running_loop()
        self._greeting = loop.create_future()
        exited: asyncio.Future = loop.create_future()

        def on_exit() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(process.sentinel, on_exit)
        self._tasks = [
            asyncio.create_task(self._receive(socket)),
            asyncio.create_task(self._watch(process, exited)),
        ]
        await socket.send(m.encode(m.Hello()))
        try:
            ready = await self._greeting
        finally:
            self._show_stage(None)
        if isinstance(ready, m.StartFailed):
            await self._reap()
            raise EngineStartFailed(ready.message)
        self.handshake = ready
        log.info(
            "engine rank %d ready (pid %d, %s, %d KV blocks)",
            self.rank,
            ready.pid,
            ready.device,
            ready.num_kv_blocks,
        )

    async def stop(self) -> None:
        """Shut the engine down (its requests should have drained) and wait for it to exit."""
        self._stopping = True
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._restarting
            self._restarting = None
        if self._socket is not None and self.process is not None and self.process.is_alive():
            with contextlib.suppress(zmq.ZMQError):
                await self._socket.send(m.encode(m.Shutdown()))
        await self._reap(wait_s=SHUTDOWN_WAIT_S)

    async def _reap(self, wait_s: float = 0.0) -> None:
        """The process gone (killed if it outlives `wait_s`), the socket closed, requests failed."""
        process, self.process = self.process, None
        self.handshake = None
        self.stats = None
        if process is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(process.sentinel)
            await asyncio.to_thread(process.join, wait_s)
            if process.is_alive():
                log.warning("engine rank %d did not exit in %.0f s: killing it", self.rank, wait_s)
                process.kill()
                await asyncio.to_thread(process.join, 5.0)
            _LIVE.discard(process)
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks = []
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        self._fail_all(EngineDied(f"engine rank {self.rank} stopped"))
        self._show_stage(None)

    async def _watch(self, process: BaseProcess, exited: asyncio.Future) -> None:
        await exited
        if self._stopping:
            return
        await asyncio.to_thread(process.join, 1.0)
        code = process.exitcode
        was_up = self.up
        log.error(
            "engine rank %d exited (exit code %s); failing its %d request(s)", self.rank, code, self.load
        )
        error = EngineDied(f"engine rank {self.rank} died (exit code {code})")
        self._fail_all(error)
        self._prompt_stats_before = self.prompt_cache_stats()
        self._prompt_stats = PromptCacheStats()
        if self._greeting is not None and not self._greeting.done():
            self._greeting.set_result(m.StartFailed(f"the engine process exited (exit code {code})"))
            return  # start() reaps it and reports the failure
        await self._reap()
        if was_up:
            self._restarting = asyncio.create_task(self._restart())

    async def _restart(self) -> None:
        pause, longest = RESTART_BACKOFF_S
        while not self._stopping:
            try:
                await self._spawn()
            except EngineStartFailed as exc:
                log.error("engine rank %d failed to restart: %s; next try in %.1f s", self.rank, exc, pause)
                await asyncio.sleep(pause)
                pause = min(2 * pause, longest)
                continue
            self.restarts += 1
            log.info("engine rank %d restarted", self.rank)
            return

    # ------------------------------------------------------------------ requests

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        socket = self._socket
        if not self.up or socket is None:
            raise EngineDied(f"engine rank {self.rank} is not running")
        key = next(self._keys)
        sink: asyncio.Queue = asyncio.Queue()
        self._requests[key] = sink
        finished = False
        try:
            await socket.send(m.encode(m.Generate.of(key, request)), copy=False)
            while True:
                item = await sink.get()
                if isinstance(item, BaseException):
                    finished = True  # the engine holds nothing of it any more
                    raise item
                audio, last = item
                yield audio
                if last:
                    finished = True
                    return
        finally:
            self._requests.pop(key, None)
            if not finished and self._socket is socket and self.up:
                with contextlib.suppress(zmq.ZMQError):
                    await socket.send(m.encode(m.Abort(key)))

    async def control(self, method: str, **args: Any) -> Any:
        """Call `method` on the engine's worker (see `EngineWorker.control`); RuntimeError if it fails."""
        socket = self._socket
        if not self.up or socket is None:
            raise EngineDied(f"engine rank {self.rank} is not running")
        call_id = next(self._keys)
        reply: asyncio.Future = asyncio.get_running_loop().create_future()
        self._calls[call_id] = reply
        try:
            await socket.send(m.encode(m.ControlCall(call_id, method, args)))
            return await reply
        finally:
            self._calls.pop(call_id, None)

    # ------------------------------------------------------------------ receiving

    async def _receive(self, socket: zmq.asyncio.Socket) -> None:
        while True:
            frames = await socket.recv_multipart(copy=False)
            message = m.from_engine.decode(frames[0].buffer)
            if isinstance(message, m.Outputs):
                audio = np.frombuffer(frames[1].buffer, dtype=np.float32)
                rows = audio.reshape(-1, message.samples) if message.samples else audio.reshape(0, 0)
                for chunk in message.chunks:
                    sink = self._requests.get(chunk.key)
                    if sink is not None:
                        sink.put_nowait((rows[chunk.row], chunk.finished))
                self.stats, self._prompt_stats = message.stats, message.prompts
            elif isinstance(message, m.Stats):
                self.stats, self._prompt_stats = message.stats, message.prompts
            elif isinstance(message, m.Failed):
                sink = self._requests.pop(message.key, None)
                if sink is not None:
                    sink.put_nowait(_error_of(message))
            elif isinstance(message, m.Stage):
                self._show_stage(message.name)
            elif isinstance(message, m.Ready | m.StartFailed):
                if self._greeting is not None and not self._greeting.done():
                    self._greeting.set_result(message)
            elif isinstance(message, m.ControlReply):
                reply = self._calls.get(message.call_id)
                if reply is not None and not reply.done():
                    if message.error is not None:
                        reply.set_exception(RuntimeError(message.error))
                    else:
                        reply.set_result(message.result)

    def _show_stage(self, name: str | None) -> None:
        """Mirror the engine's start-up stage into this process's, so `/ready` names it as the engine's
        log line does."""
        if self._stage is not None:
            STAGES.hide(self._stage)
        self._stage = name
        if self._stage is not None:
            STAGES.show(self._stage)

    def _fail_all(self, error: BaseException) -> None:
        requests, self._requests = self._requests, {}
        for sink in requests.values():
            sink.put_nowait(error)
        calls, self._calls = self._calls, {}
        for reply in calls.values():
            if not reply.done():
                reply.set_exception(error)


def _error_of(failure: m.Failed) -> Exception:
    if failure.kind == "input":
        return BackendInputError(failure.message, param=failure.param, code=failure.code)
    if failure.kind == "overloaded":
        return BackendOverloaded(failure.message)
    return BackendError(failure.message)


# Engine processes still running when the interpreter exits (a start-up that failed half-way, a test
# that never stopped its server) are killed first: multiprocessing's own exit handler would otherwise
# wait for them, and they ignore SIGTERM.
_LIVE: set[BaseProcess] = set()


@atexit.register
def _kill_live_engines() -> None:
    for process in list(_LIVE):
        with contextlib.suppress(Exception):
            process.kill()
            process.join(2.0)
