"""The speech routes' two calls into tenancy: `charge` a request against its key's per-minute limits
once it is parsed, `record` its usage once it has ended."""

from __future__ import annotations

from starlette.requests import Request

from polyvox.server.app_state import app_state
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.job import SpeechJob
from polyvox.server.tenancy.caller import caller_of


async def charge(request: Request, body: SpeechRequest) -> dict[str, str]:
    """The request's `x-ratelimit-*` headers; a 429 when its key is over a per-minute limit."""
    return await app_state(request.app).tenancy.charge(caller_of(request), len(body.input))


async def record(request: Request, body: SpeechRequest, job: SpeechJob) -> None:
    await app_state(request.app).tenancy.record(
        caller_of(request), body.model, len(body.input), job.audio_seconds, job.cache_status == "HIT"
    )
