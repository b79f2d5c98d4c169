"""`MPClient`: what every client of an engine process does on its socket, whoever started the process:
hand each request's patches to that request's own queue, answer control calls, keep the engine's
start-up stage as it says it (`stage`, which `/ready` names), keep its counters, and fail the requests
it held when it goes away (`EngineDied`: the `DataParallelEngine` sends again those of them that had no
audio yet). With `hang_timeout_s`, a watchdog kills an engine process that holds requests of this
client and has said nothing for that long (it says something to every client each step it makes): its
process is alive but stuck (a device that stopped answering, a SIGSTOP), and dying, it is restarted
and its requests are ended as a dead one's are. `EngineClient` (engine/client.py) also starts
and restarts the process; `ConnectedEngineClient` (connected.py) only connects to one a launcher
owns."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import time
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np
import zmq
import zmq.asyncio

from polyvox.core.errors import EngineError, EngineInputError, EngineOverloaded
from polyvox.core.stats import BatchingStats
from polyvox.engine import messages as m
from polyvox.engine.request import EngineRequest
from polyvox.engine.stats import PromptCacheStats
from polyvox.runtime.ready_signal import ReadySignal

log = logging.getLogger(__name__)


class EngineDied(EngineError):
    """The engine process serving the request died (killed, out of memory, a device error)."""

    reason = "rank_died"  # why a request that had no audio yet was lost, to be sent again (a metric's label)


class LostMidAudio(EngineDied):
    """The rank serving the request died after some of its audio had come back. It is not sent again as
    it is: only its caller knows whether that audio went on (a stream's client has it) or can be
    thrown away and the request run again from its start, with its seed (a whole file not yet sent)."""


class SendFailed(EngineDied):
    """The request could not be sent: the engine was found down, or its socket closed, on the way."""

    reason = "send_failed"


class MPClient:
    def __init__(
        self, rank: int, address: str, hang_timeout_s: float = 0.0, ready_signal: ReadySignal | None = None
    ) -> None:
        """`hang_timeout_s`: how long the engine may hold requests of this client without a step before
        it is killed as hung (0: never); `ready_signal`: announced each time the engine comes up or goes
        down (the `DataParallelEngine`'s, shared by its ranks)."""
        self.rank = rank
        self.address = address
        self.hang_timeout_s = hang_timeout_s
        self._heard = 0.0  # when the engine last said anything (time.monotonic)
        self._busy_since = 0.0  # when this client last sent a request while it had none there
        self._watchdog: asyncio.Task | None = None
        self._handshake: m.Ready | None = None
        self.ready_signal = ready_signal or ReadySignal()
        self.stats: BatchingStats | None = None
        self.held = 0  # requests the engine reported holding, for every client
        self._prompt_stats = PromptCacheStats()
        self._socket: zmq.asyncio.Socket | None = None
        self._requests: dict[int, asyncio.Queue] = {}
        self._keys = itertools.count()
        self._calls: dict[int, asyncio.Future] = {}
        self._greeting: asyncio.Future | None = None
        self.stage: str | None = None  # the engine's start-up stage, as it last said (None: serving)

    # ------------------------------------------------------------------ state

    @property
    def handshake(self) -> m.Ready | None:
        """The engine's `Ready`, while it serves."""
        return self._handshake

    @handshake.setter
    def handshake(self, ready: m.Ready | None) -> None:
        was_up, self._handshake = self.up, ready
        if self.up != was_up:
            self.ready_signal.announce()

    @property
    def up(self) -> bool:
        return self._handshake is not None

    @property
    def load(self) -> int:
        """Requests sent to this engine and not finished (its running and waiting ones)."""
        return len(self._requests)

    def prompt_cache_stats(self) -> PromptCacheStats:
        return self._prompt_stats

    def _dealer(self, identity: bytes | None = None, connect: bool = True) -> zmq.asyncio.Socket:
        socket = zmq.asyncio.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.SNDHWM, 0)  # sending never waits on a busy engine
        socket.setsockopt(zmq.RCVHWM, 0)
        if identity is not None:
            socket.setsockopt(zmq.IDENTITY, identity)
        if connect:
            socket.connect(self.address)
        return socket

    # ------------------------------------------------------------------ requests

    async def generate(self, request: EngineRequest) -> AsyncGenerator[np.ndarray, None]:
        socket = self._socket
        if not self.up or socket is None:
            raise SendFailed(f"engine rank {self.rank} is not running")
        key = next(self._keys)
        sink: asyncio.Queue = asyncio.Queue()
        if not self._requests:
            self._busy_since = time.monotonic()
        self._requests[key] = sink
        finished = False
        try:
            self._sent()
            try:
                await socket.send(m.encode(m.Generate(key, request)), copy=False)
            except zmq.ZMQError as exc:  # the socket closed under it: the engine went away
                finished = True
                raise SendFailed(f"engine rank {self.rank} went away: {exc}") from exc
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

    def _sent(self) -> None:
        """A request went out (connected clients count the ones the engine has not reported yet)."""

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
            self._heard = time.monotonic()
            message = m.from_engine.decode(frames[0].buffer)
            if isinstance(message, m.Outputs):
                audio = np.frombuffer(frames[1].buffer, dtype=np.float32)
                rows = audio.reshape(-1, message.samples) if message.samples else audio.reshape(0, 0)
                for chunk in message.chunks:
                    sink = self._requests.get(chunk.key)
                    if sink is not None:
                        sink.put_nowait((rows[chunk.row], chunk.finished))
                self._counted(message.stats, message.prompts, message.held)
            elif isinstance(message, m.Stats):
                self._counted(message.stats, message.prompts, message.held)
            elif isinstance(message, m.Failed):
                sink = self._requests.pop(message.key, None)
                if sink is not None:
                    sink.put_nowait(_error_of(message))
            elif isinstance(message, m.Stage):
                self.stage = message.name
            elif isinstance(message, m.Ready | m.StartFailed):
                self._greeted(message)
            elif isinstance(message, m.ControlReply):
                reply = self._calls.get(message.call_id)
                if reply is not None and not reply.done():
                    if message.error is not None:
                        reply.set_exception(RuntimeError(message.error))
                    else:
                        reply.set_result(message.result)

    # ------------------------------------------------------------------ hangs

    def _start_watchdog(self) -> None:
        if self.hang_timeout_s > 0 and self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch_for_hangs())

    async def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog

    async def _watch_for_hangs(self) -> None:
        """Kill the engine process once it has held requests of this client for `hang_timeout_s`
        without a word (once per process: its death, seen as any other, ends them)."""
        killed: int | None = None
        while True:
            await asyncio.sleep(min(1.0, self.hang_timeout_s / 4))
            ready = self._handshake
            if ready is None or ready.pid == killed or not self._requests:
                continue
            quiet = time.monotonic() - max(self._heard, self._busy_since)
            if quiet < self.hang_timeout_s:
                continue
            log.error(
                "engine rank %d (pid %d) made no step in %.0f s holding %d request(s): killing it "
                "(engine_hang_timeout_s) to start it again",
                self.rank,
                ready.pid,
                quiet,
                len(self._requests),
            )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(ready.pid, signal.SIGKILL)
            killed = ready.pid

    def _counted(self, stats: BatchingStats, prompts: PromptCacheStats, held: int) -> None:
        self.stats, self._prompt_stats, self.held = stats, prompts, held

    def _greeted(self, message: m.Ready | m.StartFailed) -> None:
        if self._greeting is not None and not self._greeting.done():
            self._greeting.set_result(message)

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
        return EngineInputError(failure.message, param=failure.param, code=failure.code)
    if failure.kind == "overloaded":
        return EngineOverloaded(failure.message)
    return EngineError(failure.message)
