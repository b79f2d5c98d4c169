"""`EngineClient`: the side of one engine process (one data-parallel rank) that owns it: the API server, or
the launcher in front of several API processes. It starts the process, talks to it over a ZeroMQ DEALER
socket (an `MPClient`), and watches it: when it dies, it is marked down at once (no request is routed to
it), the requests it held end with `EngineDied` (those with no audio yet are sent again to a live rank, by
the server's rerun policy, `backends/rerun.py`), and it is started again with a growing pause between
failed tries. One that hangs holding requests is killed (`hang_timeout_s`, see `MPClient`), and so
restarted.

Engine processes are forked from multiprocessing's forkserver, which imported the engine (PyTorch with
it) once, before any of them (engine/forkserver.py, which also has it ignore SIGTERM as the ranks do): a
rank starts without importing it again (on the CPU 2.3 s of it at every start, every restart), and a
process that imported PyTorch but never touched CUDA is one CUDA allows forking from. Where there is no
forkserver (Windows), they are spawned.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import multiprocessing
import multiprocessing.util  # registers its exit handler before ours, so ours runs first
import os
from multiprocessing.process import BaseProcess

import zmq

from polyvox.engine import messages as m
from polyvox.engine import rank_entry
from polyvox.engine.link import EngineDied, MPClient
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.pidfd import PidFd
from polyvox.engine.stats import PromptCacheStats
from polyvox.runtime.logs import LogFormat
from polyvox.runtime.ready_signal import ReadySignal
from polyvox.runtime.restart_policy import RestartBackoff

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_S = 10.0  # how long a stopping engine may take to exit before it is killed

__all__ = ["EngineClient", "EngineDied", "EngineStartFailed"]


class EngineStartFailed(RuntimeError):
    """The engine process could not start (its message says why)."""


class EngineClient(MPClient):
    def __init__(
        self,
        rank: int,
        spec: ModelSpec,
        options: WorkerOptions,
        socket_dir: str,
        logging_setup: tuple[str, LogFormat] = ("warning", "text"),
        hang_timeout_s: float = 0.0,
        ready_signal: ReadySignal | None = None,
    ) -> None:
        super().__init__(rank, engine_address(socket_dir, rank), hang_timeout_s, ready_signal)
        self.spec = spec
        self.options = options
        self.logging_setup = logging_setup
        self.process: BaseProcess | None = None
        self.restarts = 0
        self._prompt_stats_before = PromptCacheStats()  # of the processes that died, summed
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self._restarting: asyncio.Task | None = None
        self._pidfd: PidFd | None = None  # the running process, where pidfds exist

    def prompt_cache_stats(self) -> PromptCacheStats:
        now, before = self._prompt_stats, self._prompt_stats_before
        return PromptCacheStats(now.encodes + before.encodes, now.hits + before.hits)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Spawn the engine process and wait for its handshake; EngineStartFailed if it cannot start."""
        self._stopping = False
        await self._spawn()
        self._start_watchdog()

    async def _spawn(self) -> None:
        context = start_context()
        level, fmt = self.logging_setup
        process = context.Process(
            target=rank_entry.run,
            args=(self.spec, self.options, self.address, os.getpid(), level, fmt, self.restarts),
            name=f"polyvox-engine-{self.rank}",
            daemon=True,
        )
        await asyncio.to_thread(process.start)
        _LIVE.add(process)
        self.process = process
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # exited already: the sentinel says so
                self._pidfd = PidFd.open(process.pid)
        socket = self._dealer()
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
            self.stage = None
        if isinstance(ready, m.StartFailed):
            await self._reap()
            raise EngineStartFailed(ready.message)
        self.handshake = ready
        log.info(
            "engine rank %d ready (pid %d, %s, %d PyTorch threads, %d KV blocks)",
            self.rank,
            ready.pid,
            ready.device,
            ready.torch_threads,
            ready.num_kv_blocks,
        )

    async def stop(self) -> None:
        """Shut the engine down (its requests should have drained) and wait for it to exit."""
        self._stopping = True
        await self._stop_watchdog()
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._restarting
            self._restarting = None
        if self._socket is not None and self.process is not None and self.process.is_alive():
            with contextlib.suppress(zmq.ZMQError):
                await self._socket.send(m.encode(m.Shutdown()))
        await self._reap(wait_s=SHUTDOWN_WAIT_S)

    async def forget(self, peer: bytes) -> None:
        """Tell the engine a client of its socket is gone, so it drops that client's requests."""
        if self._socket is not None and self.up:
            with contextlib.suppress(zmq.ZMQError):
                await self._socket.send(m.encode(m.Forget(peer)))

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
        await self._kill_if_left_running()
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks = []
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        self._fail_all(EngineDied(f"engine rank {self.rank} stopped"))
        self.stage = None

    async def _kill_if_left_running(self) -> None:
        """A rank reported exited may run on: a forked rank's exit code is read from the forkserver, and a
        forkserver gone (killed with -9) reports every rank it forked as exited (255). Such a rank is
        killed, so that none is left holding its device beside the one started in its place."""
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is None:
            return
        if not pidfd.exited():
            log.error(
                "engine rank %d was reported exited but runs on (its forkserver is gone): killing it",
                self.rank,
            )
            pidfd.kill()
            await asyncio.to_thread(pidfd.wait, 5.0)
        pidfd.close()

    async def _watch(self, process: BaseProcess, exited: asyncio.Future) -> None:
        await exited
        if self._stopping:
            return
        was_up = self.up
        self.handshake = None  # down from now: nothing more is routed here
        await asyncio.to_thread(process.join, 1.0)
        code = process.exitcode
        log.error(
            "engine rank %d exited (exit code %s) holding %d request(s): those with no audio yet are "
            "sent again, the others fail",
            self.rank,
            code,
            self.load,
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
        backoff = RestartBackoff()
        self.restarts += 1  # the handshake of the process started next says so
        while not self._stopping:
            try:
                await self._spawn()
            except EngineStartFailed as exc:
                pause = backoff.next_pause()
                log.error("engine rank %d failed to restart: %s; next try in %.1f s", self.rank, exc, pause)
                await asyncio.sleep(pause)
                continue
            log.info("engine rank %d restarted", self.rank)
            return


# What the forkserver imports before it forks a rank: process_main, and SIGTERM ignored (engine/forkserver.py)
FORKSERVER_PRELOAD = "polyvox.engine.forkserver"


def start_context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """How engine processes start: the forkserver, which imports process_main (and so PyTorch) the first
    time a rank starts and forks every rank after from there; "spawn" where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([FORKSERVER_PRELOAD])
    return context


def engine_address(socket_dir: str, rank: int) -> str:
    return f"ipc://{socket_dir}/engine-{rank}.sock"


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
