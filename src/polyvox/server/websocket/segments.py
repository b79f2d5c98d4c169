"""One sentence of a speech socket (`Segment`) and how it is spoken: `produce` runs it through the
`SpeechService` (the HTTP route's door: limits, admission, cache, encoding, speed) into its queue of
encoded audio, ending with `DONE` or a `Failure`. polyvox's own WebSocket and the ElevenLabs-shaped
sockets share it, so every socket speaks exactly as `POST /v1/audio/speech` does."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from polyvox.alignment.words import WordTiming
from polyvox.backends.base import ReferenceAudio
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.synthesis import SpeechJob, SpeechService
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.metering import charge, record
from polyvox.server.tenancy.service import Tenancy

DONE = object()  # the last item of a segment's queue when its audio is complete


@dataclass(frozen=True)
class Failure:
    """The last item of a segment's queue when it failed."""

    error: BaseException


@dataclass
class Segment:
    """One sentence: its place, text, the encoded audio its task produces, and its words once known
    (seconds from the segment's first sample; None when the session did not ask for them)."""

    index: int
    text: str
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    task: asyncio.Task | None = None
    job: SpeechJob | None = None
    words: list[WordTiming] | None = None


async def produce(
    service: SpeechService,
    tenancy: Tenancy,
    connection: HTTPConnection,
    template: SpeechRequest,
    reference: ReferenceAudio | None,
    segment: Segment,
) -> None:
    """Speak `segment` as `template` asks: bytes into its queue, then `DONE` or a `Failure`. Cancelled,
    it lets go of its admission slot and the back end's request at once."""
    job = None
    body = template.model_copy(update={"input": segment.text})
    try:
        # the voice, found once for the sentence (a voice replaced meanwhile speaks as it is now)
        voice = None if reference is not None else await service.voice(body.voice, caller_of(connection))
        await charge(tenancy, connection, body)  # the key's per-minute limits, sentence by sentence
        # In flight from here until it holds an admission slot, through the HTTP route's door.
        with service.accept() as accepted_at:
            job = segment.job = await service.prepare(
                body, voice, stream=True, accepted_at=accepted_at, reference=reference
            )
            await service.lookup(job)
            await service.admit(job)
        first, pieces = await service.opening(job)  # run again if lost before any of it went out
        async with contextlib.aclosing(pieces):
            if first:
                segment.queue.put_nowait(first)
            async for piece in pieces:
                segment.queue.put_nowait(piece)
    except Exception as exc:
        segment.queue.put_nowait(Failure(exc))
        return
    finally:
        if job is not None:
            service.release(job)
            await record(tenancy, connection, body, job)  # the key's usage
    segment.queue.put_nowait(DONE)
