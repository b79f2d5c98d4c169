"""`polyvox serve --api-server-count N`: the launcher in front of everything. It holds the port,
starts the VoxCPM engine ranks (it owns them: their parent, restarting one that dies), and starts N API
server processes that connect to every rank. Where one API process cannot encode, normalise and frame
enough streams for the engine ranks, N of them can.

- Each API process accepts on a listening socket of its own, all on the one port (`SO_REUSEPORT`): the
  kernel spreads new connections evenly over them by a hash of each connection's addresses, so a
  proxy's pool of kept-alive connections lands on every process (one shared socket gave a burst of
  connections to whichever process woke first). The launcher holds the sockets and hands socket `i`
  to each API process `i` it starts: while one is dead and restarting, the connections dealt to its
  socket wait in its queue for its replacement, which takes them once its back end is ready, instead of
  being refused, reset or answered 503. Once the launcher stops, it lets go of them: each closes with
  its process.
- Each API process admits `max_concurrent_requests / N` and queues `max_queue / N` (rounded up), and
  keeps the disk audio cache (which they share) under `cache_max_bytes / N`.
- LoRA adapters are the ones named at start (`/admin/lora` cannot change them: each process would
  know a different set).
- Without `lexicon_path` (and `state_url`) the lexicon is one file in the working directory
  (`LEXICON_FILE`), which every API process edits and reloads as it would a `lexicon_path` they
  share, so a term added through one is spoken by all; it lasts as long as the launcher.
- `/metrics` from any of them sums them all: the launcher gives them one `PROMETHEUS_MULTIPROC_DIR`.
- `/ready` from any of them is 200 only once every one has started (each sets its Event in `started`).
- An API process that dies is started again with a growing pause between tries; the engine ranks drop
  what it had asked of them (`Forget`). One that cannot build its app at all (a bad setting) stops the server.
- SIGTERM drains: every API process drains, then answers 503 until all have drained, when the launcher
  lets them stop together, so no socket closes (its queue reset) while another process still answers;
  then the engine ranks stop, then the launcher exits, leaving no child behind. A second SIGTERM, or SIGINT,
  stops without waiting.
- Killed (-9), the launcher leaves the same drain behind it: each API process drains and exits, and
  each engine rank serves until the last API process has gone (its parent gone and no client connected);
  the last API process to go removes the launcher's working directory (`workdir`).
- With the embedded voice there are no engine ranks: each API process runs its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TYPE_CHECKING

from polyvox.engine.connected import peer_identity
from polyvox.runtime.restart_policy import RestartBackoff
from polyvox.runtime.startup import StartupError
from polyvox.server.multi_api import api_process, workdir
from polyvox.server.multi_api.ports import listening_sockets
from polyvox.settings import Settings

if TYPE_CHECKING:  # VoxCPM's engine ranks: PyTorch, which the embedded voice's launcher does without
    from polyvox.engine.data_parallel import DataParallelEngine

log = logging.getLogger(__name__)

STEADY_S = 30.0  # an API process that lived this long restarts after the shortest pause again
EXIT_WAIT_S = 15.0  # past the drain, how long API processes may take to exit before they are killed
DRAINED_POLL_S = 0.1  # how often, in a drain, the launcher looks whether every API process has drained
LEXICON_FILE = "lexicon.json"  # in the working directory: the API processes' lexicon without lexicon_path


def serve_many(settings: Settings) -> None:
    """Run the launcher until it is stopped; StartupError when the engine ranks or the API servers cannot
    start."""
    asyncio.run(Launcher(settings).run())


class Launcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.count = settings.api_server_count
        self.workdir = Path(tempfile.gettempdir()) / f"polyvox-launcher-{os.getpid()}"
        self.engine_sockets = self.workdir / "engines"  # the ranks' sockets
        self.metrics_dir = self.workdir / "metrics"  # the API processes' shared metric files
        self.engine: DataParallelEngine | None = None
        self.processes: dict[int, BaseProcess] = {}
        self.drained: dict[int, Event] = {}  # each API process's word that it has drained
        self.all_drained: Event  # the launcher's word to them (made in `run`)
        self.started: tuple[Event, ...] = ()  # each API process's word that it has started (made in `run`)
        self.failure: str | None = None
        self._stopping = asyncio.Event()
        self._draining = False
        self._stop_together: asyncio.Task | None = None

    def _child_settings(self) -> Settings:
        """Each API process's share of the limits. The disk audio cache is shared but each process
        evicts from what it knows of it, so each gets its share of the cap (Redis keeps one cap).
        Without `lexicon_path` (or Redis to share it), the working directory's lexicon file."""
        s = self.settings
        shares: dict[str, object] = {
            "max_concurrent_requests": math.ceil(s.max_concurrent_requests / self.count),
            "max_queue": math.ceil(s.max_queue / self.count),
        }
        if not s.state_url:
            shares["cache_max_bytes"] = s.cache_max_bytes // self.count
            if s.lexicon_path is None:
                shares["lexicon_path"] = self.workdir / LEXICON_FILE
        return s.model_copy(update=shares)

    def _build_engine(self) -> DataParallelEngine | None:
        """The VoxCPM ranks the API processes will share (None for the embedded voice)."""
        s = self.settings
        if not (s.model or s.random_weights):
            return None
        if not s.engine_process:
            raise StartupError(
                "api_server_count > 1 needs engine_process on: the API processes share its ranks"
            )
        from polyvox.backends.voxcpm import engine_ranks

        return engine_ranks(s, str(self.engine_sockets))  # the ranks alone: no back end around them

    async def run(self) -> None:
        s = self.settings
        shutil.rmtree(self.workdir, ignore_errors=True)  # a launcher with this pid that was killed -9
        self.engine_sockets.mkdir(parents=True)
        self.metrics_dir.mkdir()
        held = workdir.hold(self.workdir)  # while the launcher lives, no API process removes it
        try:
            self.engine = self._build_engine()
            listeners = listening_sockets(s.host, s.port, self.count)
            self.all_drained = multiprocessing.get_context("spawn").Event()
            # each API process's word that it has started: /ready is 200 only once every one has
            self.started = tuple(multiprocessing.get_context("spawn").Event() for _ in range(self.count))
            # read by prometheus_client when the API processes import it (the launcher exports nothing)
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(self.metrics_dir)
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, self._on_signal, signal.SIGTERM)
            loop.add_signal_handler(signal.SIGINT, self._on_signal, signal.SIGINT)
            log.info(
                "launcher (pid %d): %d API server processes on http://%s:%d, %d engine rank(s)",
                os.getpid(),
                self.count,
                s.host,
                listeners[0].getsockname()[1],
                len(self.engine.specs) if self.engine is not None else 0,
            )
            tasks = [asyncio.create_task(self._keep(i, listener)) for i, listener in enumerate(listeners)]
            if self.engine is not None:
                tasks.append(asyncio.create_task(self._start_engines()))
            await asyncio.gather(*tasks)
            if self.engine is not None:
                await self.engine.stop()
        finally:
            for process in self.processes.values():
                with contextlib.suppress(Exception):
                    process.kill()
            shutil.rmtree(self.workdir, ignore_errors=True)
            os.close(held)
        if self.failure is not None:
            raise StartupError(self.failure)
        log.info("launcher: every process has exited")

    async def _start_engines(self) -> None:
        assert self.engine is not None
        try:
            await self.engine.start()
        except Exception as exc:
            self.failure = f"the engine failed to start: {exc}"
            log.error("%s", self.failure)
            self._stop(drain=False)

    # ------------------------------------------------------------------ API processes

    async def _keep(self, index: int, listener: socket.socket) -> None:
        """Run API process `index` on `listener` until the launcher stops, starting it again when it
        dies; then close the socket (what waits there now would wait for nobody)."""
        try:
            await self._keep_running(index, listener)
        finally:
            listener.close()

    async def _keep_running(self, index: int, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        backoff = RestartBackoff()
        restarted = False
        while not self._stopping.is_set():
            context = multiprocessing.get_context("spawn")
            seat = api_process.Seat(
                index,
                os.getpid(),
                restarted,
                context.Event(),
                self.all_drained,
                str(self.workdir),
                self.started,
            )
            process = context.Process(
                target=api_process.run,
                args=(self._child_settings(), listener, self._engine_sockets(), seat),
                name=f"polyvox-api-{index}",
            )
            await asyncio.to_thread(process.start)
            self.processes[index], self.drained[index], restarted = process, seat.drained, True
            started = loop.time()
            exited: asyncio.Future[None] = loop.create_future()

            def on_exit(exited: asyncio.Future[None] = exited) -> None:
                if not exited.done():
                    exited.set_result(None)

            loop.add_reader(process.sentinel, on_exit)
            try:
                await self._until_exit(process, exited, listener)
            finally:
                loop.remove_reader(process.sentinel)
            await asyncio.to_thread(process.join, 5.0)
            del self.processes[index]
            await self._forget(process)
            if self._stopping.is_set():
                return
            if process.exitcode == api_process.EXIT_START_FAILED:
                self.failure = f"API server {index} could not start (its log says why)"
                self._stop(drain=False)
                return
            if loop.time() - started >= STEADY_S:
                backoff.reset()
            pause = backoff.next_pause()
            log.error(
                "API server %d (pid %s) exited (exit code %s); starting it again in %.1f s",
                index,
                process.pid,
                process.exitcode,
                pause,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)

    async def _until_exit(
        self, process: BaseProcess, exited: asyncio.Future, listener: socket.socket
    ) -> None:
        """Wait for the process to exit; once the launcher stops, give it the drain and then kill it. Its
        socket is then the process's alone: it closes as the process stops accepting, and connections go
        to the processes still draining (which answer 503) instead of waiting where none accepts."""
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait([exited, stopping], return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                return
            listener.close()
            limit = self.settings.shutdown_grace_s + EXIT_WAIT_S if self._draining else EXIT_WAIT_S
            try:
                await asyncio.wait_for(asyncio.shield(exited), limit)
            except TimeoutError:
                log.warning("API server pid %s did not exit in %.0f s: killing it", process.pid, limit)
                process.kill()
        finally:
            stopping.cancel()

    def _engine_sockets(self) -> str | None:
        return str(self.engine_sockets) if self.engine is not None else None

    async def _forget(self, process: BaseProcess) -> None:
        """A dead API process: its gauges leave /metrics, and the engine ranks drop its requests."""
        from prometheus_client import multiprocess

        if process.pid is not None:
            multiprocess.mark_process_dead(process.pid, str(self.metrics_dir))
            if self.engine is not None:
                await self.engine.forget(peer_identity(process.pid))

    # ------------------------------------------------------------------ stopping

    def _on_signal(self, sig: int) -> None:
        first = not self._stopping.is_set()
        drain = sig == signal.SIGTERM and first
        if drain:
            log.info("SIGTERM: every API server drains, then the engines stop")
        self._stop(drain)

    def _stop(self, drain: bool) -> None:
        self._draining = drain
        self._stopping.set()
        self._signal_all(signal.SIGTERM if drain else signal.SIGINT)
        if drain:
            self._stop_together = asyncio.create_task(self._stop_all_once_drained())

    async def _stop_all_once_drained(self) -> None:
        """Every API process, drained, answers 503 with its socket open until all have drained (or
        gone); then they stop together."""
        while any(
            process.is_alive() and not self.drained[index].is_set()
            for index, process in list(self.processes.items())
        ):
            await asyncio.sleep(DRAINED_POLL_S)
        self.all_drained.set()

    def _signal_all(self, sig: int) -> None:
        for process in list(self.processes.values()):
            if process.pid is not None and process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, sig)
