"""One API server process behind the launcher: the whole polyvox app (HTTP, text front end, voices,
cache, encoding, metrics) on the listening socket the launcher hands it, its VoxCPM engine ranks
reached by connecting to the launcher's (`ConnectedEngineClient`).

- It drains on SIGTERM as `polyvox serve` does, but once drained it answers 503 until every API
  process has drained and the launcher lets them stop together, so no socket closes while another
  process still drains.
- One started again after it died accepts connections only once its back end is ready: those the
  kernel dealt its socket meanwhile wait for it and are served, not answered 503 while it connects.
- It drains and exits by itself when the launcher is gone (killed): the engine ranks serve on until
  their last API process has gone, so what was in flight finishes. The last API process to go removes
  the launcher's working directory (`workdir`), as the launcher would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polyvox.runtime.heap import startup_heap
from polyvox.runtime.logs import setup_logging
from polyvox.runtime.startup import StartupError
from polyvox.server.multi_api import workdir
from polyvox.settings import Settings

if TYPE_CHECKING:
    from polyvox.server.app_state import AppState

log = logging.getLogger(__name__)

EXIT_START_FAILED = 3  # the app could not be built (its log says why): restarting it cannot help
ORPHAN_POLL_S = 0.5
ORPHAN_EXIT_S = 15.0  # past the drain, how long an orphan may take to exit before it stops at once
READY_WAIT_S = 30.0  # how long a process waits for its back end before it accepts regardless


@dataclass(frozen=True)
class Seat:
    """An API process's place behind the launcher: its number, the launcher (its parent), whether it
    replaces one that died, the drain's two words (its own that it has drained, and the launcher's that
    all have), the launcher's working directory, and every API process's word that it has started (by
    number; one set stays set while its process is replaced)."""

    index: int
    launcher_pid: int
    restarted: bool
    drained: Event
    all_drained: Event
    workdir: str
    started: tuple[Event, ...]

    def peers_starting(self) -> list[int]:
        """The numbers of the other API processes that have not yet started."""
        return [n for n, started in enumerate(self.started) if n != self.index and not started.is_set()]


def run(settings: Settings, listener: socket.socket, engine_sockets: str | None, seat: Seat) -> None:
    """The process's entry point (spawned; picklable arguments only)."""
    log_config = setup_logging(settings.log_level, settings.log_format)
    held = workdir.hold(Path(seat.workdir))
    orphaned = threading.Event()
    watch = threading.Thread(
        target=_drain_when_orphaned,
        args=(seat.launcher_pid, settings.shutdown_grace_s, orphaned),
        daemon=True,
    )
    watch.start()
    # the collector off while the server's modules load and its app is built, then what they made frozen
    # (runtime/heap.py)
    with startup_heap():
        from polyvox.backends.factory import build_backend, build_text_pipeline
        from polyvox.server.app import create_app, draining_server
        from polyvox.server.app_state import app_state
        from polyvox.server.connections import uvicorn_config
        from polyvox.settings.errors import files_named_by

    try:
        with files_named_by(settings), startup_heap():
            backend = build_backend(settings, engine_sockets)
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
    except StartupError as exc:
        log.error("API server %d cannot start: %s", seat.index, exc)
        sys.exit(EXIT_START_FAILED)
    log.info("API server %d (pid %d) serving", seat.index, os.getpid())
    # Only the first process's socket answers while its engine loads (/ready names the stage); the
    # others, and any replacement, accept once theirs is ready: the kernel deals each socket its share of
    # connections, and one dealt to a process still loading (its own embedded voice, or its link to the
    # engine ranks) was answered 503 engine_not_ready. And /ready, whichever process is asked, is 200
    # only once every process has started: the first one's 200 while another still loaded (or the other way
    # round) sent clients to a process that answered them 503.
    state = app_state(app)
    state.peers_starting = seat.peers_starting
    first_start = seat.index == 0 and not seat.restarted
    served = Seated(app, state, seat.started[seat.index], accept_at_once=first_start)
    config = uvicorn_config(served, settings, log_config)

    def stop_when_drained() -> bool:
        seat.drained.set()
        return seat.all_drained.is_set() or orphaned.is_set()  # with no launcher to say when, at once

    # a service manager's SIGTERM and the launcher's may both arrive: the second must not cut the drain
    server = draining_server(app, config, repeat_sigterm_stops=False, on_drained=stop_when_drained)
    server.run(sockets=[listener])
    if orphaned.is_set() and workdir.remove_if_last(Path(seat.workdir), held):
        log.info("the launcher's working directory %s is removed", seat.workdir)


class Seated:
    """The app as uvicorn runs it in an API process. Its lifespan's start-up is reported complete, and so
    uvicorn starts accepting, once the back end's first start is over (it came up or failed; at most
    READY_WAIT_S), except in the first process's first start (`accept_at_once`), so that `/ready` names
    the stage while the engine loads. Once the process can serve (back end ready, voices frozen, warmed
    up) it sets `started`. Both wait on what the lifespan announces (`AppState.engine_tried`,
    `start_up_done`) and on the back end's own ready signal; nothing is polled."""

    def __init__(self, app: Any, state: AppState, started: Event, accept_at_once: bool) -> None:
        self.app = app
        self.state = state
        self.started = started
        self.accept_at_once = accept_at_once
        self._reporting: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_once_ready(message: dict) -> None:
            if message["type"] == "lifespan.startup.complete":
                self._reporting = asyncio.create_task(self._report_started())
                if not self.accept_at_once:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.state.engine_tried.wait(), READY_WAIT_S)
            await send(message)

        try:
            await self.app(scope, receive, send_once_ready)
        finally:
            if self._reporting is not None:
                self._reporting.cancel()

    async def _report_started(self) -> None:
        from polyvox.server.health import not_started

        state = self.state
        await state.start_up_done.wait()
        while not_started(state, state.backend) is not None:
            if state.backend_failure or state.lifecycle.draining:
                return  # it will not serve: /ready stays 503
            await state.backend.until_ready()  # an engine restarting since: serving once it is back
        self.started.set()


def _drain_when_orphaned(launcher_pid: int, grace_s: float, orphaned: threading.Event) -> None:
    """The launcher gone (killed), nothing will restart this process or its engine ranks: drain what is in
    flight and exit, as the launcher would have had it do on SIGTERM, and within the time it would have
    given (then at once: its engine ranks wait for it to go)."""
    while os.getppid() == launcher_pid:
        time.sleep(ORPHAN_POLL_S)
    log.warning("the launcher is gone: draining and exiting")
    orphaned.set()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s + ORPHAN_EXIT_S)
    log.error("still running %.0f s after the launcher went: exiting at once", grace_s + ORPHAN_EXIT_S)
    os._exit(1)
