"""The speech routes' two calls into tenancy (HTTP requests, and each sentence of a WebSocket
session): `charge` one against its key's per-minute limits once it is parsed, `record` its usage once
it has ended."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.job import SpeechJob
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.service import Tenancy


async def charge(tenancy: Tenancy, connection: HTTPConnection, body: SpeechRequest) -> dict[str, str]:
    """The request's `x-ratelimit-*` headers; a 429 when its key is over a per-minute limit."""
    return await tenancy.charge(caller_of(connection), len(body.input))


async def record(tenancy: Tenancy, connection: HTTPConnection, body: SpeechRequest, job: SpeechJob) -> None:
    await tenancy.record(
        caller_of(connection), body.model, len(body.input), job.audio_seconds, job.cache_status == "HIT"
    )
