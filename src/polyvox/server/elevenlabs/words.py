"""Where the ElevenLabs routes get an answer's words: the job's `Timeline` (the speech service times
each piece as it is spoken, when the request asks for `timestamp_granularities: ["word"]`)."""

from __future__ import annotations

from typing import Any

from polyvox.alignment.words import WordTiming
from polyvox.server.speech.job import SpeechJob


def wants_words() -> dict[str, Any]:
    """The request fields that ask the speech service for word timings."""
    return {"timestamp_granularities": ["word"]}


def answer_words(job: SpeechJob | None) -> list[WordTiming] | None:
    """Every word of the answer known so far, on its clock (None: no timings for this answer)."""
    timeline = job.plan.timeline if job is not None else None
    return None if timeline is None else timeline.words
