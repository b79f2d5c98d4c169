"""One ElevenLabs HTTP answer through the `SpeechService`, as `POST /v1/audio/speech` runs one: the key's
stream and per-minute limits, the voice check, admission, cache and encoding; `Answer` holds the job,
its first bytes and the rest, and `close` gives back everything it holds, once."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from starlette.requests import Request

from polyvox.server.elevenlabs.output_format import OutputFormat, UlawEncoder
from polyvox.server.errors import APIError
from polyvox.server.protocol import SpeechRequest
from polyvox.server.served_models import check_model
from polyvox.server.speech.synthesis import SpeechJob, SpeechService, until_disconnect
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.limits import StreamLease
from polyvox.server.tenancy.metering import charge, record
from polyvox.server.tenancy.service import Tenancy


@dataclass
class Answer:
    """A running answer: `first` bytes already made, `rest` to come (both μ-law when asked)."""

    request: Request
    service: SpeechService
    tenancy: Tenancy
    body: SpeechRequest
    job: SpeechJob
    lease: StreamLease | None
    first: bytes
    pieces: AsyncGenerator[bytes, None]
    ulaw: UlawEncoder | None = None
    closed: bool = field(default=False)

    async def rest(self) -> AsyncGenerator[bytes, None]:
        async for piece in self.pieces:
            yield self.ulaw.push(piece) if self.ulaw is not None else piece

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.pieces.aclose()
        finally:
            self.service.release(self.job)
            await record(self.tenancy, self.request, self.body, self.job)
            await self.tenancy.close_stream(self.lease)


async def start_answer(
    request: Request,
    service: SpeechService,
    tenancy: Tenancy,
    body: SpeechRequest,
    output: OutputFormat,
    *,
    stream: bool,
) -> Answer:
    """Check, admit and start `body`; its first bytes are made before it returns, so a failure still
    gets a status. Everything taken is given back if it fails on the way."""
    lease = await tenancy.open_stream(caller_of(request))  # the key's `max_streams`, as /v1/audio/speech
    job: SpeechJob | None = None
    try:
        with service.accept() as accepted_at:
            check_model(body.model, service.backend, service.settings.accept_any_model)
            # the voice, found once (another key's private voice: as an unknown one), before the charge
            voice = await service.voice(body.voice, caller_of(request))
            await charge(tenancy, request, body)  # the key's per-minute limits (429 past them)
            job = await service.prepare(body, voice, stream=stream, accepted_at=accepted_at)
            await service.lookup(job)
            await service.admit(job, request)
        first, pieces = await until_disconnect(request, service.opening(job))
    except BaseException:
        if job is not None:
            service.release(job)
            await record(tenancy, request, body, job)
        await tenancy.close_stream(lease)
        raise
    encoder = UlawEncoder() if output.ulaw else None
    if encoder is not None:
        first = encoder.push(first)
    return Answer(request, service, tenancy, body, job, lease, first, pieces, encoder)


async def read_limited(request: Request, limit: int) -> bytes:
    """The request body, 413 past `limit` bytes."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise APIError(413, f"the request body is over {limit} bytes", code="request_too_large")
    return bytes(data)
