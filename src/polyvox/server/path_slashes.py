"""Repeated slashes in a request's path read as one (`/v1//audio/speech` is `/v1/audio/speech`), as
nginx's `merge_slashes` does: clients that join a base URL ending in `/` with `/audio/speech` (Open
WebUI) reach the route. Outermost, so routing, auth and its scopes all see the normalised path."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

_REPEATED = re.compile(r"/{2,}")
_REPEATED_RAW = re.compile(rb"/{2,}")


class MergeSlashesMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and "//" in scope["path"]:
            scope = dict(scope, path=_REPEATED.sub("/", scope["path"]))
            if raw := scope.get("raw_path"):
                scope["raw_path"] = _REPEATED_RAW.sub(b"/", raw)
        await self.app(scope, receive, send)
