"""One Wyoming client connection: events read as they come (so a client that leaves is noticed at once,
mid-answer too, and its generation cancelled), `describe` answered with `info`, `synthesize` and the
streaming form (`synthesize-start`, `-chunk`s, `-stop`) with `audio-start`, `audio-chunk`s as the audio
is made, `audio-stop` (and `synthesize-stopped`). A bad event gets an `error` event and the connection
goes on; events of types it does not serve are dropped, as Wyoming expects of a server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from polyvox.server.errors import APIError
from polyvox.server.websocket.protocol import as_api_error
from polyvox.server.websocket.sentences import SentenceBuffer
from polyvox.server.wyoming.answer import Answer
from polyvox.server.wyoming.info import describe
from polyvox.server.wyoming.speech import WyomingSpeech

log = logging.getLogger(__name__)

SAMPLE_WIDTH = 2  # 16-bit PCM
CHANNELS = 1


class BadEvent(Exception):
    """An event line that is no event (not JSON, no `type`); the next line may be one."""


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event (None when the client has gone); BadEvent for a line that is none."""
    line = await reader.readline()
    if not line:
        return None
    try:
        header = json.loads(line)
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise BadEvent("an event is a JSON object with a string `type`")
        data = header.get("data") or {}
        if (length := header.get("data_length")) is not None and length > 0:
            data = {**data, **json.loads(await reader.readexactly(length))}
        payload = None
        if (length := header.get("payload_length")) is not None and length > 0:
            payload = await reader.readexactly(length)
    except (ValueError, TypeError, AttributeError) as exc:
        raise BadEvent(f"not a Wyoming event: {exc}") from exc
    if not isinstance(data, dict):
        raise BadEvent("an event's data is a JSON object")
    return Event(type=header["type"], data=data, payload=payload)


class _Stream:
    """The streaming form in progress: its sentence buffer and its answer (None: it failed to start)."""

    def __init__(self, buffer: SentenceBuffer, answer: Answer | None):
        self.buffer = buffer
        self.answer = answer


class WyomingConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, speech: WyomingSpeech):
        self.reader = reader
        self.writer = writer
        self.speech = speech
        self.write_lock = asyncio.Lock()
        self.stream: _Stream | None = None
        self.answer: Answer | None = None
        self.sending: asyncio.Task | None = None

    async def serve(self) -> None:
        try:
            while (event := await self._next()) is not None:
                try:
                    await self._handle(event)
                except (KeyError, TypeError, ValueError) as exc:
                    await self._error(APIError(400, f"{event.type}: bad data ({exc})", code="invalid_event"))
                except Exception as exc:
                    await self._error(as_api_error(exc))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            await self._stop_answer()
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()

    async def _next(self) -> Event | None:
        while True:
            try:
                return await read_event(self.reader)
            except BadEvent as exc:
                await self._error(APIError(400, str(exc), code="invalid_event"))

    async def _handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            caller = await self.speech.caller()
            service = self.speech.service
            await self._write(describe(service.backend, service.voice_registry, caller).event())
        elif Ping.is_type(event.type):
            await self._write(Pong(text=Ping.from_event(event).text).event())
        elif Synthesize.is_type(event.type):
            if self.stream is not None:
                return  # sent beside the streaming form for older servers: the stream says it all
            synthesize = Synthesize.from_event(event)
            await self._finish_answer()
            answer = await self.speech.answer(synthesize.voice)
            answer.add(synthesize.text)
            answer.end()
            self._send(answer, streaming=False)
        elif SynthesizeStart.is_type(event.type):
            if self.stream is not None:
                raise APIError(400, "synthesize-start: a stream is already open", code="stream_open")
            start = SynthesizeStart.from_event(event)
            await self._finish_answer()
            self.stream = _Stream(SentenceBuffer(self.speech.service.settings.max_piece_chars), None)
            answer = await self.speech.answer(start.voice)  # an error here: the stream's events are dropped
            self.stream.answer = answer
            self._send(answer, streaming=True)
        elif SynthesizeChunk.is_type(event.type):
            stream = self._open_stream(event.type)
            sentences = stream.buffer.push(SynthesizeChunk.from_event(event).text)
            if stream.answer is not None:
                for sentence in sentences:
                    stream.answer.add(sentence)
        elif SynthesizeStop.is_type(event.type):
            stream = self._open_stream(event.type)
            self.stream = None
            if stream.answer is None:
                await self._write(SynthesizeStopped().event())
                return
            if (rest := stream.buffer.flush()) is not None:
                stream.answer.add(rest)
            stream.answer.end()

    def _open_stream(self, kind: str) -> _Stream:
        if self.stream is None:
            raise APIError(400, f"{kind} outside a synthesize-start ... synthesize-stop", code="no_stream")
        return self.stream

    def _send(self, answer: Answer, streaming: bool) -> None:
        self.answer = answer
        self.sending = asyncio.create_task(self._send_answer(answer, streaming))

    async def _send_answer(self, answer: Answer, streaming: bool) -> None:
        """The answer's audio events (its error instead, at the first failure; the streaming form then
        waits for its `synthesize-stop`), then `synthesize-stopped` for the streaming form."""
        audio = (answer.rate, SAMPLE_WIDTH, CHANNELS)
        started = False
        failure: Exception | None = None
        try:
            async with contextlib.aclosing(answer.chunks()) as chunks:
                async for pcm in chunks:
                    if not started:
                        started = True
                        await self._write(AudioStart(*audio).event())
                    await self._write(AudioChunk(*audio, audio=pcm).event())
        except ConnectionError:
            raise
        except Exception as exc:
            failure = exc
        finally:
            await answer.close()  # its key's stream is free before its last event leaves
        if failure is not None:
            await self._error(as_api_error(failure))
            await answer.ended.wait()  # the streaming form's text still comes, and is dropped
        else:
            if not started:
                await self._write(AudioStart(*audio).event())
            await self._write(AudioStop().event())
        if streaming:
            await self._write(SynthesizeStopped().event())

    async def _finish_answer(self) -> None:
        """Wait for the answer being sent (a client that sends a second request before the first one's
        end is answered in order)."""
        if self.sending is not None:
            await asyncio.gather(self.sending, return_exceptions=True)
            self.sending = None

    async def _stop_answer(self) -> None:
        """The client has gone: stop sending and cancel every generation of its answer at once."""
        if self.sending is not None:
            self.sending.cancel()
            await asyncio.gather(self.sending, return_exceptions=True)
        if self.answer is not None:
            await self.answer.close()

    async def _error(self, error: APIError) -> None:
        self.speech.service.metrics.errors.labels(type=error.code or error.type).inc()
        await self._write(Error(text=error.message, code=error.code or error.type).event())

    async def _write(self, event: Event) -> None:
        async with self.write_lock:
            await async_write_event(event, self.writer)
