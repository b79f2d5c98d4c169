"""ElevenLabs' text-to-speech sockets under `/elevenlabs`: `/v1/text-to-speech/{voice_id}/stream-input`
(one context) and `.../multi-stream-input` (several contexts on one socket), their query read here
(`output_format`, `apply_text_normalization`, `sync_alignment`); the session is `socket_session`."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Depends, WebSocket
from starlette.websockets import WebSocketDisconnect

from polyvox.server.deps import get_authorizer, get_service, get_tenancy
from polyvox.server.elevenlabs.http_routes import PREFIX
from polyvox.server.elevenlabs.output_format import parse_output_format
from polyvox.server.elevenlabs.socket_session import ElevenLabsSocket, SocketOptions
from polyvox.server.errors import APIError, error_response
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.authorization import Authorizer
from polyvox.server.tenancy.service import Tenancy

router = APIRouter(prefix=PREFIX, tags=["elevenlabs"])


def _options(websocket: WebSocket, voice_id: str) -> SocketOptions:
    query = websocket.query_params
    output = parse_output_format(query.get("output_format"))
    sync = query.get("sync_alignment", "false").lower() == "true"
    return SocketOptions(voice_id, output, query.get("apply_text_normalization"), sync)


async def _serve(
    websocket: WebSocket,
    service: SpeechService,
    tenancy: Tenancy,
    authorizer: Authorizer,
    voice_id: str,
    *,
    multi: bool,
) -> None:
    try:
        options = _options(websocket, voice_id)
    except APIError as exc:  # refused before the handshake: an HTTP answer naming the value
        await websocket.send_denial_response(error_response(exc))
        return
    session = ElevenLabsSocket(
        websocket, service, tenancy, options, multi=multi, authorize_key=authorizer.authorize_key
    )
    with contextlib.suppress(WebSocketDisconnect):
        await session.run()


@router.websocket("/v1/text-to-speech/{voice_id}/stream-input")
async def stream_input(
    websocket: WebSocket,
    voice_id: str,
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
    authorizer: Authorizer = Depends(get_authorizer),
) -> None:
    """Text in as it comes, audio out as JSON messages; `{"text": ""}` ends the input."""
    await _serve(websocket, service, tenancy, authorizer, voice_id, multi=False)


@router.websocket("/v1/text-to-speech/{voice_id}/multi-stream-input")
async def multi_stream_input(
    websocket: WebSocket,
    voice_id: str,
    service: SpeechService = Depends(get_service),
    tenancy: Tenancy = Depends(get_tenancy),
    authorizer: Authorizer = Depends(get_authorizer),
) -> None:
    """Several contexts (`context_id`) on one socket, each flushed, closed or cancelled on its own."""
    await _serve(websocket, service, tenancy, authorizer, voice_id, multi=True)
