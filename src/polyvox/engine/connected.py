"""`ConnectedEngineClient`: an API process's side of an engine process that the launcher owns
(`api_server_count` > 1). It only connects; what the engine does it learns from the socket itself:
connected, it says hello and waits for the handshake; disconnected (the process died), it ends the requests
it had there with `EngineDied` (those with no audio yet are sent again to a live rank, by the server's
rerun policy, `backends/rerun.py`) and waits for the launcher's restarted engine to take the socket again,
on a fresh connection so nothing queued for the dead one reaches the new one. One that hangs holding
requests of this process is killed (`hang_timeout_s`, see `MPClient`): the launcher restarts it as any that
died.

Its load is the engine's own count (what every API process sent it) plus what this process sent since the
engine last reported, so each API process routes on the loads all of them make."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from polyvox.core.stats import BatchingStats
from polyvox.engine import messages as m
from polyvox.engine.link import EngineDied, MPClient
from polyvox.engine.stats import PromptCacheStats
from polyvox.runtime.ready_signal import ReadySignal

log = logging.getLogger(__name__)


def peer_identity(pid: int | None = None) -> bytes:
    """How an API process is known on every engine's socket (the launcher forgets it by this name)."""
    return b"api-%d" % (os.getpid() if pid is None else pid)


class ConnectedEngineClient(MPClient):
    def __init__(
        self, rank: int, address: str, hang_timeout_s: float = 0.0, ready_signal: ReadySignal | None = None
    ) -> None:
        super().__init__(rank, address, hang_timeout_s, ready_signal)
        self._unreported = 0  # requests sent since the engine last told its count
        self._task: asyncio.Task | None = None
        self.restarts = 0  # as the engine's last handshake told (the launcher counts them)

    @property
    def load(self) -> int:
        return max(len(self._requests), self.held + self._unreported)

    def _sent(self) -> None:
        self._unreported += 1

    def _counted(self, stats: BatchingStats, prompts: PromptCacheStats, held: int) -> None:
        super()._counted(stats, prompts, held)
        self._unreported = 0

    def _greeted(self, message: m.Ready | m.StartFailed) -> None:
        if isinstance(message, m.Ready):
            self.handshake = message
            self.restarts = message.restarts
            self.stage = None
            log.info("engine rank %d is serving (pid %d, %s)", self.rank, message.pid, message.device)
        else:
            self.handshake = None
            self.stage = None

    async def start(self) -> None:
        """Connect (the engine may not be listening yet) and keep the connection in step with it."""
        if self._task is None:
            self._task = asyncio.create_task(self._follow())
        self._start_watchdog()

    async def stop(self) -> None:
        await self._stop_watchdog()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._down(EngineDied(f"engine rank {self.rank} stopped"))

    async def _follow(self) -> None:
        """One connection per engine process: hello when it connects, fail its requests when it drops."""
        while True:
            socket = self._dealer(peer_identity(), connect=False)
            # watched before it connects, so the connection's event cannot come first
            monitor = socket.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
            socket.connect(self.address)
            receiving: asyncio.Task | None = None
            try:
                while True:
                    event = parse_monitor_message(await monitor.recv_multipart())["event"]
                    if event == zmq.EVENT_CONNECTED:
                        self._socket = socket
                        receiving = asyncio.create_task(self._receive(socket))
                        await socket.send(m.encode(m.Hello()))
                    elif event == zmq.EVENT_DISCONNECTED:
                        break
            finally:
                if receiving is not None:
                    receiving.cancel()
                    with contextlib.suppress(asyncio.CancelledError, zmq.ZMQError):
                        await receiving
                socket.disable_monitor()
                monitor.close(linger=0)
                socket.close(linger=0)
            if self.up:
                log.error(
                    "engine rank %d is gone holding %d request(s) of this process: those with no audio "
                    "yet are sent again, the others fail",
                    self.rank,
                    len(self._requests),
                )
            self._down(EngineDied(f"engine rank {self.rank} died"))

    def _down(self, error: BaseException) -> None:
        self.handshake = None
        self.stats = None
        self._socket = None
        self.held = self._unreported = 0
        self._fail_all(error)
        self.stage = None
