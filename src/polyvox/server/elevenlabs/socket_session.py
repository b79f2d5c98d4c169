"""One ElevenLabs text-to-speech socket: `stream-input` (one context) or `multi-stream-input` (several,
named by `context_id`). It reads the client's messages (text, `flush`, `close_context`, `close_socket`,
the key when the handshake had none), runs each context (`context.Context`) through the `SpeechService`,
and sends their audio messages through one lock. A disconnect, `close_socket` or an immediate
`close_context` cancels the back-end work of what it ends at once. Errors are ElevenLabs' socket shape:
`{"error", "message", "contextId"}`, and the session goes on (a refused key closes it, 1008)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import WebSocket
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocketDisconnect

from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.server.elevenlabs.context import Context
from polyvox.server.elevenlabs.output_format import OutputFormat
from polyvox.server.elevenlabs.requests import VoiceSettings, speech_fields, speech_request
from polyvox.server.elevenlabs.words import wants_words
from polyvox.server.errors import APIError, DeadlineExceeded
from polyvox.server.protocol import SpeechRequest
from polyvox.server.served_models import check_model
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.caller import KEY_TO_COME, Caller, caller_of
from polyvox.server.tenancy.limits import StreamLease
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.websocket.protocol import as_api_error
from polyvox.voices.errors import VoiceError

log = logging.getLogger(__name__)

_KEY_LATE = APIError(401, "send the key (`xi_api_key`) in the first message", code="invalid_api_key")
MAX_CONTEXTS = 5  # open at once on one socket, as ElevenLabs allows
POLICY_VIOLATION = 1008


class SocketOptions:
    """What the handshake's query asks: the voice, format, normalisation and alignment clock."""

    def __init__(self, voice_id: str, output: OutputFormat, normalization: str | None, sync_alignment: bool):
        self.voice_id = voice_id
        self.output = output
        self.normalization = normalization
        self.sync_alignment = sync_alignment


# auth's `authorize_key`: the caller a key brought later (in a socket's first message) is; APIError if none
KeyCheck = Callable[[HTTPConnection, str | None], Awaitable[Caller]]


class ElevenLabsSocket:
    def __init__(
        self,
        websocket: WebSocket,
        service: SpeechService,
        tenancy: Tenancy,
        options: SocketOptions,
        *,
        multi: bool,
        authorize_key: KeyCheck,
    ):
        """`authorize_key` checks the key a socket whose handshake brought none (`KEY_TO_COME`) sends in
        its first message, as auth checks a handshake's, and leaves the caller in its scope."""
        self.websocket = websocket
        self.authorize_key = authorize_key
        self.service = service
        self.tenancy = tenancy
        self.options = options
        self.multi = multi
        self.contexts: dict[str | None, Context] = {}
        self.send_lock = asyncio.Lock()
        self.lease: StreamLease | None = None
        self.closing = False

    async def run(self) -> None:
        await self.websocket.accept()
        try:
            while True:
                message = await self._receive()
                if message is None:  # a socket without a key that did not bring one in time
                    await self._error(_KEY_LATE, None)
                    await self._close(POLICY_VIOLATION)
                    return
                if message["type"] == "websocket.disconnect":
                    return
                try:
                    await self._handle(message)
                except APIError as exc:
                    await self._error(exc, self._context_id_of(message))
                except KeyRefused as exc:
                    await self._error(exc.error, None)
                    await self._close(POLICY_VIOLATION)
                    return
                if self.closing:
                    return
        except WebSocketDisconnect:
            return
        finally:
            for context in list(self.contexts.values()):
                await context.cancel()
            self.contexts.clear()
            await self.tenancy.close_stream(self.lease)

    async def _receive(self) -> Mapping[str, Any] | None:
        """The next message; None when the key is still to come and `request_read_timeout_s` passed
        without it (a keyless socket holds nothing for long)."""
        if caller_of(self.websocket) is not KEY_TO_COME:
            return await self.websocket.receive()
        try:
            async with asyncio.timeout(self.service.settings.request_read_timeout_s):
                return await self.websocket.receive()
        except TimeoutError:
            return None

    # ------------------------------------------------------------------ client messages

    async def _handle(self, message: Mapping[str, Any]) -> None:
        data = _decode(message)
        if caller_of(self.websocket) is KEY_TO_COME:
            try:
                await self.authorize_key(self.websocket, _key_of(data))
            except APIError as exc:
                raise KeyRefused(exc) from exc
        if self.lease is None:  # the key's `max_streams`: this socket is one stream
            self.lease = await self.tenancy.open_stream(caller_of(self.websocket))
        if data.get("close_socket") is True:
            await self._close_socket()
            return
        context_id = self._context_id(data)
        context = self.contexts.get(context_id)
        if context is not None and context.finished.is_set():  # done: its id may name a new one
            del self.contexts[context_id]
            context = None
        if data.get("close_context") is True:
            if context is not None:
                if data.get("immediate") is True:
                    await self._end(context)
                else:
                    context.close()
            return
        text = data.get("text")
        flush = data.get("flush") is True
        if text is not None and not isinstance(text, str):
            raise APIError(400, "`text` must be a string", param="text")
        if context is None:
            if not text and not flush:  # a keep-alive, or the end of a stream-input that said nothing
                if text == "" and not self.multi:
                    await self._send({"isFinal": True})
                return
            context = await self._open(context_id, data)
        elif context.closing and (text or flush):
            raise APIError(
                400, f"context {context_id!r} is closed", param="context_id", code="context_closed"
            )
        if text:
            try:
                context.push(text)
            except ValueError as exc:
                raise APIError(400, str(exc), param="text", code="too_much_text_queued") from exc
        elif text == "" and not self.multi:  # stream-input: an empty text ends the input
            context.close()
            return
        if flush:
            context.flush()

    def _context_id(self, data: dict[str, Any]) -> str | None:
        if not self.multi:
            return None
        context_id = data.get("context_id", data.get("contextId"))
        if context_id is None:
            return "default"  # ElevenLabs' context for messages that name none
        if not isinstance(context_id, str) or not context_id:
            raise APIError(400, "`context_id` must be a non-empty string", param="context_id")
        return context_id

    def _context_id_of(self, message: Mapping[str, Any]) -> str | None:
        with contextlib.suppress(APIError, AttributeError):
            return self._context_id(_decode(message))
        return None

    async def _open(self, context_id: str | None, data: dict[str, Any]) -> Context:
        """A new context, its settings from its first message (`voice_settings`) and the handshake."""
        self.contexts = {k: c for k, c in self.contexts.items() if not c.finished.is_set()}
        if len(self.contexts) >= MAX_CONTEXTS:
            # A new turn while the socket is full: the oldest context the client has closed (its reply
            # over, or barged in on) is stopped to make room; with none closed, the new one is refused.
            closed = next((c for c in self.contexts.values() if c.closing), None)
            if closed is None:
                raise APIError(
                    429, f"at most {MAX_CONTEXTS} contexts are open on one socket", code="too_many_contexts"
                )
            await self._end(closed)
        template = await self._template(data)
        context = Context(
            context_id,
            service=self.service,
            tenancy=self.tenancy,
            connection=self.websocket,
            template=template,
            send=self._send,
            on_failure=self._failed,
            ulaw=self.options.output.ulaw,
            context_clock=self.options.sync_alignment,
        )
        self.contexts[context_id] = context
        return context

    async def _template(self, data: dict[str, Any]) -> SpeechRequest:
        settings_data = data.get("voice_settings")
        try:
            voice_settings = VoiceSettings.model_validate(settings_data) if settings_data else None
        except ValueError as exc:
            raise APIError(400, f"voice_settings: {exc}", param="voice_settings") from exc
        options = self.options
        fields = speech_fields(options.voice_id, voice_settings, options.normalization)
        fields |= {
            "input": "Hello.",
            "response_format": options.output.response_format,
            "sample_rate": options.output.sample_rate,
        }
        template = speech_request(fields | wants_words())
        check_model(template.model, self.service.backend, self.service.settings.accept_any_model)
        try:
            voice = await self.service.voice(template.voice, caller_of(self.websocket))
            # Whether the voice, format and back end can serve the context at all, before any text:
            with self.service.accept() as accepted_at:
                await self.service.prepare(template, voice, stream=True, accepted_at=accepted_at)
        except (VoiceError, BackendError, BackendInputError, DeadlineExceeded) as exc:
            raise as_api_error(exc) from exc
        return template

    async def _end(self, context: Context) -> None:
        """Stop `context` at once (its back-end work let go), then its `isFinal`."""
        await context.cancel()
        self.contexts.pop(context.id, None)
        await self._send(_with_context({"isFinal": True}, context.id))

    async def _close_socket(self) -> None:
        for context in list(self.contexts.values()):
            await context.cancel()
        self.contexts.clear()
        await self._close(1000)

    async def _close(self, code: int) -> None:
        self.closing = True
        async with self.send_lock:
            with contextlib.suppress(RuntimeError, OSError):
                await self.websocket.close(code)

    # ------------------------------------------------------------------ server messages

    async def _send(self, payload: dict[str, Any]) -> None:
        async with self.send_lock:
            await self.websocket.send_text(json.dumps(payload, separators=(",", ":")))
        if payload.get("isFinal") is True and not self.multi:
            await self._close(1000)  # stream-input: its one context is done

    async def _failed(self, context_id: str | None, error: BaseException) -> None:
        await self._error(as_api_error(error), context_id)

    async def _error(self, error: APIError, context_id: str | None) -> None:
        self.service.metrics.errors.labels(type=error.code or error.type).inc()
        payload = {"error": error.code or error.type, "message": error.message, "code": error.status_code}
        await self._send(_with_context(payload, context_id))


class KeyRefused(Exception):
    def __init__(self, error: APIError):
        super().__init__(error.message)
        self.error = error


def _decode(message: Mapping[str, Any]) -> dict[str, Any]:
    if message.get("text") is None:
        raise APIError(400, "send JSON text messages", code="invalid_message")
    try:
        data = json.loads(message["text"])
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise APIError(400, f"a message is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(data, dict):
        raise APIError(400, "a message must be a JSON object", code="invalid_message")
    return data


def _key_of(data: dict[str, Any]) -> str | None:
    """The key the first message brings: `xi_api_key`, or `authorization` as `Bearer <key>`."""
    key = data.get("xi_api_key")
    if isinstance(key, str):
        return key
    bearer = data.get("authorization")
    if isinstance(bearer, str):
        return bearer.removeprefix("Bearer ").strip()
    return None


def _with_context(payload: dict[str, Any], context_id: str | None) -> dict[str, Any]:
    if context_id is not None:
        payload["contextId"] = context_id
    return payload
