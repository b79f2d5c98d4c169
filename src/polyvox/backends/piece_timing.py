"""`PieceTimer`: the word timings of one answer spoken through the text front end, piece by piece.

A piece's bounds are exact: the pieces are joined end to end (faded at the seams, never overlapped), so
piece n starts where piece n-1's samples end. Its words come from the back end itself when it times them
(`capabilities.word_timings`: the embedded voice, from piper's phoneme lengths), or else from the
`aligner` run over the piece's own audio in a worker thread once the piece is generated, while the
pieces after it go on streaming. Each piece's `PieceTiming` (the client's words: `ClientWords`) is added
to the request's `Timeline` in order, as soon as it and every piece before it are timed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import numpy as np

from polyvox.alignment.aligners import Aligner, Span
from polyvox.alignment.client_words import ClientWords
from polyvox.alignment.timeline import Timeline
from polyvox.backends.base import SynthesisRequest

log = logging.getLogger(__name__)


class PieceTimer:
    """Times the pieces of `request` (its `timeline` is where they go) at `sample_rate`."""

    def __init__(
        self,
        request: SynthesisRequest,
        timeline: Timeline,
        pieces: list[str],
        sample_rate: int,
        aligner: Aligner,
        native: bool,
    ):
        self.timeline = timeline
        self.rate = sample_rate
        self.aligner = aligner
        self.native = native  # the back end fills each piece request's `spans`
        self.words = ClientWords(request.text, pieces)
        self._spans: dict[int, list[Span]] = {}
        self._audio: dict[int, list[np.ndarray]] = {}
        self._pending: list[tuple[int, float, float, asyncio.Future[list[Span]]]] = []
        self._samples = 0  # of the pieces ended so far: where the next one starts

    def piece_request(self, index: int, request: SynthesisRequest) -> SynthesisRequest:
        """Piece `index`'s request, asking a back end that times its words to report them."""
        if not self.native:
            return request
        spans = self._spans[index] = []
        return replace(request, spans=spans)

    def chunk(self, index: int, samples: np.ndarray) -> None:
        """A chunk of piece `index` as the back end made it (kept for the aligner, if it is needed)."""
        self._audio.setdefault(index, []).append(np.asarray(samples, dtype=np.float32).reshape(-1))

    def piece_done(self, index: int) -> None:
        """Piece `index` has ended: its bounds are known; its words are taken from the back end, or an
        aligner starts on its audio."""
        audio = self._audio.pop(index, [])
        samples = np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)
        start = self._samples / self.rate
        self._samples += samples.size
        end = self._samples / self.rate
        spoken = self.words.words_of(index)
        spans = self._spans.pop(index, None)
        task: asyncio.Future[list[Span]]
        if spans is not None and len(spans) == len(spoken):
            task = asyncio.get_running_loop().create_future()
            task.set_result(spans)
        else:
            if spans is not None:
                log.warning("piece %d: %d of %d words timed by the back end", index, len(spans), len(spoken))
            task = asyncio.ensure_future(asyncio.to_thread(self._align, samples, spoken))
        self._pending.append((index, start, end, task))
        self.flush()

    def _align(self, samples: np.ndarray, spoken: list[str]) -> list[Span]:
        """The aligner's spans of one piece; shared out evenly (approximate) should it fail."""
        try:
            if samples.size:
                return self.aligner.align(samples, self.rate, spoken)
        except Exception:
            log.exception("the %s aligner failed; the piece's words shared out evenly", self.aligner.name)
        step = samples.size / self.rate / len(spoken)
        return [Span(i * step, (i + 1) * step, True) for i in range(len(spoken))]

    def flush(self) -> None:
        """Add to the timeline every piece timed so far whose earlier pieces are all there."""
        while self._pending and self._pending[0][3].done():
            index, start, end, task = self._pending.pop(0)
            self.timeline.add(self.words.piece(index, start, end, task.result()))

    async def finish(self) -> None:
        """Wait for every piece's words and add them: the timeline is then complete."""
        while self._pending:
            await asyncio.wait([self._pending[0][3]])
            self.flush()
        self.timeline.complete = True

    def cancel(self) -> None:
        """Stop waiting for alignments (the answer ended early; a running one finishes in its thread)."""
        for _, _, _, task in self._pending:
            task.cancel()
        self._pending.clear()
