"""The server's side of `state_url`: `connect` makes this replica's sync with Redis (the speech service
is built with its audio cache), `install` guards the routes that change shared state; the lifespan
calls `start` and `stop`.

While Redis is unreachable a change to voices, consents or the lexicon would stay on the one replica
that took it and vanish from the others, so such requests are refused with a 503 saying why
(synthesis itself goes on). Reads catching up with Redis and changes published before their answer
are `fresh_reads`' part.

`polyvox.state` needs the `redis` package (the `redis` extra): it is imported only when `state_url` is
set, so a server without it starts with what `make serve` installs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from polyvox.runtime.startup import StartupError
from polyvox.server.errors import error_body
from polyvox.settings import Settings

if TYPE_CHECKING:
    from polyvox.server.metrics import Metrics
    from polyvox.state.replica_sync import ReplicaSync
    from polyvox.text.lexicon import Lexicon
    from polyvox.voices.registry import VoiceRegistry

REDIS_MISSING = (
    "state_url is set, but the redis package is not installed: pip install 'polyvox[redis]' "
    "(or unset state_url)"
)

GUARDED_PREFIXES = ("/v1/audio/voices", "/v1/voices", "/v1/audio/voice_consents", "/admin/lexicon")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def connect(settings: Settings) -> ReplicaSync | None:
    """With `state_url` set, this replica's sync with Redis (not started yet), whose audio cache the
    speech service is built with; None without it."""
    if not settings.state_url:
        return None
    try:
        from polyvox.state.connection import StateConnection
        from polyvox.state.replica_sync import ReplicaSync
    except ModuleNotFoundError as exc:
        if exc.name != "redis":
            raise
        raise StartupError(REDIS_MISSING) from None
    connection = StateConnection(settings.state_url)
    # A Redis holding state in a format this polyvox cannot read stops the start, in one line; one that
    # cannot be reached now is checked when it is found (and taken as down if its format is newer).
    connection.check()
    if connection.format_error is not None:
        raise StartupError(connection.format_error)
    return ReplicaSync(connection, settings.state_sync_interval_s)


def install(app: FastAPI, shared: ReplicaSync | None, metrics: Metrics) -> None:
    """With `state_url` set (`shared`, made by `connect`): its metrics and the guard. Call before the
    auth middleware is added, so the guard runs after auth."""
    if shared is None:
        return
    from polyvox.state.connection import StateCollector

    metrics.registry.register(StateCollector(shared.connection))
    app.add_middleware(StateGuard, shared=shared)


async def start(shared: ReplicaSync | None, registry: VoiceRegistry, lexicon: Lexicon | None) -> None:
    """Start this replica's sync of `registry`'s voices and `lexicon` with Redis (None: no state_url)."""
    if shared is not None:
        shared.connection.open_async()  # on the loop that serves the requests catching up through it

        def voices_synced(changed: bool) -> None:
            # The directory may be shared by sibling API processes too (api_server_count), whose changes
            # are in it already: a sync that brought nothing still looks whether voices.json changed.
            if changed:
                registry.reload()
            else:
                registry.refresh()

        await anyio.to_thread.run_sync(shared.start, registry.store, voices_synced, lexicon)


async def stop(shared: ReplicaSync | None) -> None:
    if shared is not None:
        await anyio.to_thread.run_sync(shared.stop)
        await shared.connection.aclose()


def changes_shared_state(scope: Scope) -> bool:
    """Whether the request may change what servers share: an HTTP write under `GUARDED_PREFIXES`."""
    return (
        scope["type"] == "http"
        and scope["method"] not in READ_METHODS
        and scope["path"].startswith(GUARDED_PREFIXES)
    )


class StateGuard:
    """Refuses changes to shared state while Redis is unreachable."""

    def __init__(self, app: ASGIApp, shared: ReplicaSync):
        self.app = app
        self.shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not changes_shared_state(scope):
            await self.app(scope, receive, send)
            return
        if not self.shared.connection.available:
            await _refuse(
                send,
                f"{self.shared.connection.describe()}; voices, consents and the lexicon "
                "cannot be changed until it returns (speech still works)",
            )
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps(error_body(message, "server_error", None, "state_unavailable")).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"5")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
