"""Read your own writes across servers: what a client changed through one server (a replica sharing
`state_url`, or a server sharing the voices directory) is what its next request through any other
reads. `FreshReads` runs around every request that reads or changes voices, consents or the lexicon,
speech and its WebSocket included:

- before it, this server's copy catches up with the shared state (`SharedCopy.catch_up`): with
  `state_url`, one round trip comparing Redis' version counters with those last synced here, and a
  sync only when they moved; without it, a stat of `voices.json` and of the lexicon file. So a voice
  made elsewhere a moment ago speaks here, and one deleted elsewhere is refused here;
- after a change succeeds and before its answer is sent, the change is published
  (`SharedCopy.publish`): pushed to Redis, so once the client holds the answer no server reads the
  state from before it (the shared files need nothing: the change is in them already).

A catch-up or publication that fails never fails the request: the copy here serves, as it does while
Redis is unreachable, and the background sync carries the change later.
"""

from __future__ import annotations

import logging
from typing import Protocol

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from polyvox.server.shared_state.state_url import GUARDED_PREFIXES, changes_shared_state

log = logging.getLogger(__name__)

# Everything that reads voices, consents or the lexicon: speech (its stream and WebSocket too), the
# voice and consent routes, the lexicon's, the voice reload and the playground's voice list.
READ_PREFIXES = (*GUARDED_PREFIXES, "/v1/audio/speech", "/admin/reload-voices", "/ui/voices")


class SharedCopy(Protocol):
    """This server's copy of the voices directory and the lexicon, kept in step with other servers'."""

    async def catch_up(self) -> None: ...

    async def publish(self) -> None: ...


def install(app: FastAPI, copy: SharedCopy) -> None:
    """After `state_url.install`: the copy is Redis' (`AppState.shared`) or, without `state_url`, the
    voices directory and lexicon file this server may share (`AppState.directory_watch`, started with the
    lifespan)."""
    app.add_middleware(FreshReads, copy=copy)


class FreshReads:
    """Catches up before the requests of `READ_PREFIXES`; publishes the changes of `GUARDED_PREFIXES`
    that succeed before their answer starts."""

    def __init__(self, app: ASGIApp, copy: SharedCopy):
        self.app = app
        self.copy = copy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not scope["path"].startswith(READ_PREFIXES):
            await self.app(scope, receive, send)
            return
        await self._catch_up()
        if not changes_shared_state(scope):
            await self.app(scope, receive, send)
            return

        async def send_published(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                await self._publish()
            await send(message)

        await self.app(scope, receive, send_published)

    async def _catch_up(self) -> None:
        try:
            await self.copy.catch_up()
        except Exception:  # the copy held here serves
            log.exception("shared state: catching up before a request failed; serving this server's copy")

    async def _publish(self) -> None:
        try:
            await self.copy.publish()
        except Exception:  # the change is made here; the background sync carries it
            log.exception("shared state: publishing a change failed; the background sync retries it")
