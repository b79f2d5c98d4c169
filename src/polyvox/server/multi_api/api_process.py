"""One API server process behind the launcher: the whole polyvox app (HTTP, text front end, voices,
cache, encoding, metrics) on the listening socket the launcher shares, its VoxCPM engine ranks reached
by connecting to the launcher's (`ConnectedEngineClient`). It drains on SIGTERM as `polyvox serve`
does, and drains and exits when the launcher is gone (killed): the engine ranks serve on until their
last API process has gone, so what was in flight finishes."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time

from polyvox.logs import setup_logging
from polyvox.settings import Settings
from polyvox.startup import StartupError

log = logging.getLogger(__name__)

EXIT_START_FAILED = 3  # the app could not be built (its log says why): restarting it cannot help
ORPHAN_POLL_S = 0.5
ORPHAN_EXIT_S = 15.0  # past the drain, how long an orphan may take to exit before it stops at once


def run(
    settings: Settings, listener: socket.socket, engine_sockets: str | None, launcher_pid: int, index: int
) -> None:
    """The process's entry point (spawned; picklable arguments only)."""
    log_config = setup_logging(settings.log_level, settings.log_format)
    orphan = threading.Thread(
        target=_drain_when_orphaned, args=(launcher_pid, settings.shutdown_grace_s), daemon=True
    )
    orphan.start()
    from polyvox.backends.factory import build_backend
    from polyvox.server.app import create_app
    from polyvox.server.connections import uvicorn_config
    from polyvox.server.lifecycle.draining import DrainingServer
    from polyvox.settings.errors import files_named_by

    try:
        with files_named_by(settings):
            app = create_app(settings, build_backend(settings, engine_sockets))
    except StartupError as exc:
        log.error("API server %d cannot start: %s", index, exc)
        sys.exit(EXIT_START_FAILED)
    log.info("API server %d (pid %d) serving", index, os.getpid())
    config = uvicorn_config(app, settings, log_config)
    # a service manager's SIGTERM and the launcher's may both arrive: the second must not cut the drain
    server = DrainingServer.serving(app, config, repeat_sigterm_stops=False)
    server.run(sockets=[listener])


def _drain_when_orphaned(launcher_pid: int, grace_s: float) -> None:
    """The launcher gone (killed), nothing will restart this process or its engines: drain what is in
    flight and exit, as the launcher would have had it do on SIGTERM, and within the time it would have
    given (then at once: its engines wait for it to go)."""
    while os.getppid() == launcher_pid:
        time.sleep(ORPHAN_POLL_S)
    log.warning("the launcher is gone: draining and exiting")
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s + ORPHAN_EXIT_S)
    log.error("still running %.0f s after the launcher went: exiting at once", grace_s + ORPHAN_EXIT_S)
    os._exit(1)
