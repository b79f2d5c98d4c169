"""How the operator's settings shape what a client asked for: whether a request's `instructions`
reach the back end (`instructions_mode`, with per-voice exceptions in `instructions_mode_by_voice`),
the output rate of a request that names none (`default_sample_rate`), whether an answer streams and
which timestamps it carries.

`instructions` dropped here never reach the back end nor the cache key: with `ignore`, a request
with instructions is the same request as one without.
"""

from __future__ import annotations

from polyvox.audio.formats import default_output_rate, get_format
from polyvox.backends.base import BackendInfo
from polyvox.server.protocol import SpeechRequest
from polyvox.settings import Settings


def instructions_for(settings: Settings, voice: str, instructions: str | None) -> str | None:
    """The request's `instructions` if its voice's mode is `design`, else None."""
    mode = settings.instructions_mode_by_voice.get(voice, settings.instructions_mode)
    return instructions if mode == "design" else None


def default_rate(settings: Settings, backend: BackendInfo) -> int:
    """The output rate of a request that names none, before it is fitted to the format."""
    return default_output_rate(settings.default_sample_rate, backend.sample_rate)


def timed(body: SpeechRequest) -> tuple[str, ...]:
    """The timestamps the answer carries (`timestamp_granularities`; subtitles are made of segments
    unless words are asked): none in a chunked audio stream (`stream_format: audio`), which has no room
    for them."""
    asked = tuple(body.timestamp_granularities or ())
    if body.subtitles:
        return asked or ("segment",)
    return () if body.stream_format == "audio" else asked


def streams(body: SpeechRequest) -> bool:
    """Whether the answer streams. Subtitles, and timestamps outside SSE (one JSON object), are whole.
    Asked for (`stream_format`, or `stream` given): as asked. Otherwise it streams, as OpenAI answers,
    but for a format whose streamed file a common reader cannot read (`whole_by_default`: FLAC, whose
    streamed STREAMINFO cannot hold its length, which libsndfile needs), answered whole so that the
    file a client gets by default reads everywhere."""
    if body.subtitles or (timed(body) and body.stream_format != "sse"):
        return False
    if body.stream_format is not None:
        return True
    if "stream" in body.model_fields_set:
        return body.stream
    return not get_format(body.response_format).whole_by_default
