"""The forms an HTTP answer's word timestamps take: SSE `speech.audio.timestamps` events (one per piece,
as it is timed) and the lists in `speech.audio.done`; the whole JSON answer (`SpeechWithTimestamps`:
the audio in base64 and its timestamps); subtitles (`srt`, `vtt`)."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from starlette.responses import JSONResponse, Response

from polyvox.alignment.subtitles import SUBTITLE_TYPES, subtitles
from polyvox.alignment.timeline import PieceTiming
from polyvox.alignment.words import WordTiming
from polyvox.server.protocol import (
    SegmentTimestamp,
    SpeechAudioTimestamps,
    SpeechWithTimestamps,
    WordTimestamp,
)
from polyvox.server.speech.job import SpeechJob


def words_of(words: Sequence[WordTiming]) -> list[WordTimestamp]:
    return [WordTimestamp.model_validate(word.as_json()) for word in words]


def segment_of(piece: PieceTiming) -> SegmentTimestamp:
    return SegmentTimestamp.model_validate(piece.as_json())


def piece_event(piece: PieceTiming, granularities: Sequence[str]) -> SpeechAudioTimestamps:
    """One piece's SSE event, with what was asked of it."""
    return SpeechAudioTimestamps(
        segment=segment_of(piece) if "segment" in granularities else None,
        words=words_of(piece.words) if "word" in granularities else None,
    )


def all_timestamps(job: SpeechJob) -> dict[str, object]:
    """`words` and `segments` of the whole answer, as asked (none when nothing was)."""
    timeline = job.plan.timeline
    if timeline is None:
        return {}
    found: dict[str, object] = {}
    if "word" in job.plan.granularities:
        found["words"] = words_of(timeline.words)
    if "segment" in job.plan.granularities:
        found["segments"] = [segment_of(piece) for piece in timeline.pieces]
    return found


def timestamps_answer(job: SpeechJob, audio: bytes, headers: dict[str, str]) -> JSONResponse:
    """The whole answer of a job asked for timestamps without SSE (`SpeechWithTimestamps`)."""
    body = SpeechWithTimestamps(
        audio=base64.b64encode(audio).decode(),
        response_format=job.plan.fmt.name,
        content_type=job.plan.content_type,
        duration=round(job.audio_seconds, 3),
        usage=job.usage(),
        **all_timestamps(job),
    )
    return JSONResponse(body.model_dump(exclude_none=True), headers=headers)


def subtitles_answer(job: SpeechJob, fmt: str, headers: dict[str, str]) -> Response:
    """The answer's words as a subtitle file: a cue per piece, or per word when only words were asked."""
    pieces = job.plan.timeline.pieces if job.plan.timeline is not None else []
    per_word = "word" in job.plan.granularities and "segment" not in job.plan.granularities
    return Response(subtitles(pieces, fmt, per_word), media_type=SUBTITLE_TYPES[fmt], headers=headers)
