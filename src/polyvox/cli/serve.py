"""`polyvox serve`: the HTTP server in this process or, with `api_server_count` > 1, the launcher of
several API processes (`server/multi_api/`)."""

from __future__ import annotations

import argparse
import ipaddress
import logging

from polyvox.cli.flags import add_settings_flags, settings_from_args
from polyvox.runtime.heap import startup_heap
from polyvox.runtime.logs import setup_logging
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings

log = logging.getLogger("polyvox")


def add_serve(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="Run the OpenAI-compatible HTTP server.")
    add_settings_flags(parser)
    parser.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    # the collector off while the server's modules load and its app is built, then what they made frozen
    # (runtime/heap.py)
    with startup_heap():
        from polyvox.server.app import create_app, draining_server
        from polyvox.server.app_state import app_state
        from polyvox.server.connections import uvicorn_config
        from polyvox.server.multi_api.ports import bound_socket
        from polyvox.server.tenancy.key_store import named_keys_exist
        from polyvox.settings.errors import files_named_by

    settings = settings_from_args(args)
    log_config = setup_logging(settings.log_level, settings.log_format)
    if settings.api_server_count > 1:
        return _serve_many(settings)
    listener = bound_socket(settings.host, settings.port)  # a port taken is one line, before anything loads
    with listener:
        with files_named_by(settings), startup_heap():
            app = create_app(settings)
        state = app_state(app)
        info = state.backend.info
        port = listener.getsockname()[1]
        log.info("serving %s (model %s) on http://%s:%d", info.name, info.model_id, settings.host, port)
        _warn_if_open(settings, state.keyring.open and not named_keys_exist(settings))
        config = uvicorn_config(app, settings, log_config)  # handed its socket
        server = draining_server(app, config)
        server.run(sockets=[listener])
    if server.failure is not None:
        raise StartupError(f"the engine failed to start: {server.failure}")
    return 0


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only: localhost, 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False


def _warn_if_open(settings: Settings, keyless: bool) -> None:
    if keyless and not is_loopback(settings.host):
        log.warning(
            "listening on %s:%d, beyond loopback, with no API key: anyone who can reach this port can "
            "synthesise, clone voices and use the admin routes (set api_keys or api_keys_file, or "
            "listen on 127.0.0.1 behind a proxy that checks callers)",
            settings.host,
            settings.port,
        )


def _serve_many(settings: Settings) -> int:
    """`api_server_count` > 1: the launcher, its engine ranks and its API server processes."""
    from polyvox.server.key_ring import KeyRing
    from polyvox.server.multi_api.launcher import serve_many
    from polyvox.server.tenancy.key_store import named_keys_exist

    _warn_if_open(settings, KeyRing.from_settings(settings).open and not named_keys_exist(settings))
    serve_many(settings)
    return 0
