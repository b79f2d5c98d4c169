"""`segment.words`: a `/v1/audio/speech/ws` segment's word timings (and its pieces, with the `segment`
granularity) as the speech service times them, on the session's clock: seconds from the first sample
of the session's audio, counting every segment spoken to its end before this one (a `cancel` starts the
clock again at 0, as the client drops what it was playing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polyvox.alignment.timeline import PieceTiming
from polyvox.server.speech.job import SpeechJob

GRANULARITIES = ("word", "segment")


def new_pieces(job: SpeechJob | None) -> list[PieceTiming]:
    """The job's pieces timed since the last call (none when it was not asked for timings)."""
    timeline = job.plan.timeline if job is not None else None
    return [] if timeline is None else timeline.take()


def words_event(
    segment: int, pieces: list[PieceTiming], offset: float, granularities: Sequence[str]
) -> dict[str, Any] | None:
    """The `segment.words` message for `pieces`, `offset` seconds on (None when there is nothing)."""
    if not pieces:
        return None
    pieces = [piece.shifted(offset) for piece in pieces]
    event: dict[str, Any] = {"type": "segment.words", "segment": segment}
    if "word" in granularities:
        event["words"] = [word.as_json() for piece in pieces for word in piece.words]
    if "segment" in granularities:
        event["pieces"] = [piece.as_json() for piece in pieces]
    return event
