"""`/v1/audio/speech/ws`: speech for voice agents over a WebSocket (schema in docs/streaming.md).

The client configures the session once, then sends text as it comes (an LLM's tokens, say). Each
sentence becomes a segment as soon as its end arrives; `flush` makes one of whatever is buffered.
Segments are spoken in order: while one streams, the next `settings.piece_lookahead` are already
generating. Each segment goes through the same `SpeechService` path as `POST /v1/audio/speech`
(text front end, admission, cache, encoding, speed) and its audio leaves as binary frames (or
base64 JSON) between `segment.start` and `segment.done`. `cancel` stops the audio at once and drops
everything queued; a disconnect does the same, so the back end frees the request's resources.
The session itself is `polyvox.server.websocket.session.SpeechSession`; its messages, `protocol`.
"""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Depends, WebSocket
from starlette.websockets import WebSocketDisconnect

from polyvox.server.deps import get_service, get_tenancy
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.websocket.session import SpeechSession

router = APIRouter(tags=["speech"])
BROWSER_SUBPROTOCOL = "polyvox"


@router.websocket("/v1/audio/speech/ws")
async def speech_socket(
    websocket: WebSocket,
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
) -> None:
    """Incremental text in, audio per sentence out (see docs/streaming.md). Auth as the HTTP routes, or
    from a browser: subprotocols `polyvox` and `polyvox.key.<base64url of the key>`."""
    offered = websocket.scope.get("subprotocols", ())
    # A browser that offered subprotocols (its key rides on one: tenancy/authorization.py's websocket_key)
    # needs one chosen in the answer, or it drops the connection; the key's own is never echoed.
    chosen = BROWSER_SUBPROTOCOL if BROWSER_SUBPROTOCOL in offered else None
    session = SpeechSession(websocket, service, tenancy, subprotocol=chosen)
    with contextlib.suppress(WebSocketDisconnect):
        await session.run()
