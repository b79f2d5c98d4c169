"""`TextPipeline`: the text step of a request's path, long text on any back end. It owns the text front
end (lexicon, normalisation, splitting), the pieces' lookahead and crossfades, the aligner and the
counters of pieces and characters spoken; it is not a back end and holds none. `checked(backend,
request)` prepares the request's text into pieces and has the back end check each, once: the server
puts the result in the request's plan (`SpeechPlan`), which the rest of the path only reads.
`generate(backend, request)` speaks those very pieces on the back end, in order, pipelined, and joined
without clicks. A text step without a front end speaks the text as written, in one piece, straight on
the back end (a back end handed to `create_app` without a text step is served so). Every piece goes
to the back end through `rerun.sent`: one the back end lost before any of its audio came back is sent
again.

While piece n streams to the client, pieces n+1 … n+`lookahead` are already generating: each runs
in its own task that pulls the back end's chunks into a queue. Chunks are yielded strictly in
order. At each seam the last `crossfade_ms` of the earlier piece fade out and the first
`crossfade_ms` of the later piece fade in (raised-cosine ramps), so the waveform meets near zero
instead of jumping; a single-piece request passes through untouched. Closing the stream cancels
every running piece and closes its back end's generator before `aclose()` returns.

Every piece reuses the request's voice, reference, instructions, generation parameters and seed, so
sampling back ends draw the same noise for each piece. The server fixes the seed of every request as it
prepares it; a request without one, from a caller that came straight to `generate` (`polyvox say`
without `--seed`, a bench script), gets one drawn there, once. Each piece's request carries the
request's `Listener` and the piece's index, so a back end that shares a few workers among requests (the
embedded voice) can serve them fairly; back ends that batch on their own ignore them.

A request with a `timeline` (word timestamps asked) has each piece timed as it ends (`PieceTimer`: the
back end's own word times, or the `aligner` over the piece's audio, off the event loop), on the clock of
the joined audio.
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace

import numpy as np

from polyvox.alignment.aligners import ESTIMATE, Aligner, make_aligner
from polyvox.backends.base import AudioStream, Backend, SynthesisRequest
from polyvox.backends.errors import EmptyInput
from polyvox.backends.fair_queue import Listener
from polyvox.backends.piece_timing import PieceTimer
from polyvox.backends.rerun import sent
from polyvox.text.frontend import TextFrontend
from polyvox.text.lexicon import Lexicon

_DONE = object()


@dataclass(frozen=True)
class _Failure:
    error: BaseException


class TextPipeline:
    """The text step of a request's path, for any back end (see the module docstring): it prepares a
    request's pieces for its plan (`checked`) and speaks a plan's pieces on a back end (`generate`). It
    holds no back end: each call names the one it prepares for or speaks on."""

    def __init__(
        self,
        frontend: TextFrontend | None = None,
        lookahead: int = 1,
        crossfade_ms: float = 10.0,
        aligner: Aligner | None = None,
    ):
        """`frontend` None: no front end, the request's text spoken as written, in one piece, straight
        on the back end (`Backend.checked`, `Backend.generate`): how a back end handed to `create_app`
        without a text step is served. `aligner` finds the words inside each piece for word timestamps,
        on a back end that does not time them itself (`capabilities.word_timings`); `estimate` without
        one."""
        if lookahead < 0:
            raise ValueError("lookahead must be 0 or more")
        if crossfade_ms < 0:
            raise ValueError("crossfade_ms must be 0 or more")
        self.frontend = frontend
        self.lookahead = lookahead
        self.crossfade_ms = crossfade_ms
        self.aligner = aligner or make_aligner(ESTIMATE)
        self._count_lock = threading.Lock()
        self.pieces_spoken = 0
        self.characters_spoken = 0

    @property
    def lexicon(self) -> Lexicon | None:
        """The front end's pronunciation lexicon, if any (it changes the audio)."""
        return self.frontend.lexicon if self.frontend is not None else None

    def checked(self, backend: Backend, request: SynthesisRequest) -> SynthesisRequest:
        """The request with its text prepared into pieces by the text front end (the lexicon, then
        normalisation as the request asks), each piece checked by `backend` (`validate`): the pieces
        generated are these, checked once. Blocking (normalisation can take most of a second on long
        text): call it off the event loop. Without a front end: the back end's own check, one piece."""
        if self.frontend is None:
            return backend.checked(request)
        pieces = self.frontend.prepare(request.text, request.normalize)
        if not pieces:  # no piece `has_words`: nothing to say, refused alike on every back end
            raise EmptyInput()
        for index, piece in enumerate(pieces):
            backend.validate(self._piece_request(request, piece, index))
        return replace(request, pieces=tuple(pieces))

    def generate(self, backend: Backend, request: SynthesisRequest) -> PieceStream | AudioStream:
        """The request's audio on `backend` as float32 chunks; the returned stream also reports its
        pieces for usage. A request without a seed (never the server's: it fixes one as it prepares a
        request) gets one here, for all its pieces and any piece sent again. Without a front end: the
        back end's own stream (through `rerun.sent`)."""
        if request.seed is None:
            request = replace(request, seed=random.getrandbits(31))
        if self.frontend is None:
            return sent(backend, request)
        return PieceStream(self, backend, request)

    def _piece_request(self, request: SynthesisRequest, piece: str, index: int) -> SynthesisRequest:
        return replace(request, text=piece, piece=index, pieces=None, timeline=None)

    def _count(self, characters: int) -> None:
        with self._count_lock:
            self.pieces_spoken += 1
            self.characters_spoken += characters


class PieceStream:
    """The chunks of one request, in order. `pieces` is filled in once the text has been prepared
    (before the first chunk); `pieces_done` counts the pieces fully streamed."""

    def __init__(self, pipeline: TextPipeline, backend: Backend, request: SynthesisRequest):
        self.pipeline = pipeline
        self.backend = backend
        self.listener = Listener()
        self.request = replace(request, listener=self.listener)
        self.pieces: list[str] = []
        self.pieces_done = 0
        self._chunks = self._stream()

    @property
    def characters(self) -> int:
        """Characters in the prepared pieces (what is actually spoken, after normalisation)."""
        return sum(len(piece) for piece in self.pieces)

    def __aiter__(self) -> PieceStream:
        return self

    async def __anext__(self) -> np.ndarray:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._chunks.aclose()

    async def _stream(self) -> AsyncGenerator[np.ndarray, None]:
        pipeline, backend, request = self.pipeline, self.backend, self.request
        if request.pieces is None:  # not checked yet (a caller that went straight to `generate`)
            request = await asyncio.to_thread(pipeline.checked, backend, request)
        assert request.pieces is not None  # `checked` prepared them
        pieces = self.pieces = list(request.pieces)
        rate = backend.info.sample_rate
        fade = round(pipeline.crossfade_ms * rate / 1000)
        timer = None
        if request.timeline is not None:
            native = backend.info.capabilities.word_timings
            timer = PieceTimer(request, request.timeline, pieces, rate, pipeline.aligner, native)
        queues: list[asyncio.Queue] = []
        tasks: list[asyncio.Task] = []
        try:
            for index, piece in enumerate(pieces):
                while len(tasks) < min(len(pieces), index + 1 + pipeline.lookahead):
                    queue: asyncio.Queue = asyncio.Queue()
                    piece_request = pipeline._piece_request(request, pieces[len(tasks)], len(tasks))
                    if timer is not None:
                        piece_request = timer.piece_request(len(tasks), piece_request)
                    tasks.append(asyncio.create_task(_pull(backend, piece_request, queue)))
                    queues.append(queue)
                seam = _Seam(fade if index > 0 else 0, fade if index < len(pieces) - 1 else 0)
                while (item := await queues[index].get()) is not _DONE:
                    if isinstance(item, _Failure):
                        raise item.error
                    if timer is not None:
                        timer.chunk(index, item)
                        timer.flush()
                    if (chunk := seam.push(item)).size:
                        yield chunk
                if (tail := seam.finish()).size:
                    yield tail
                if timer is not None:
                    timer.piece_done(index)
                self.pieces_done += 1
                pipeline._count(len(piece))
            if timer is not None:
                await timer.finish()
        finally:
            if timer is not None:
                timer.cancel()
            running = [task for task in tasks if not task.done()]
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)


async def _pull(backend: Backend, request: SynthesisRequest, queue: asyncio.Queue) -> None:
    """Move one piece's chunks from the back end into `queue`, then `_DONE` or a `_Failure`."""
    chunks: AudioStream | None = None
    try:
        chunks = sent(backend, request)
        async for chunk in chunks:
            queue.put_nowait(chunk)
    except Exception as exc:
        queue.put_nowait(_Failure(exc))
        return
    finally:
        if chunks is not None:
            await chunks.aclose()
    queue.put_nowait(_DONE)


class _Seam:
    """Fades one piece in over its first `fade_in` samples and out over its last `fade_out`, holding
    back the last `fade_out` samples until the piece is known to have ended."""

    def __init__(self, fade_in: int, fade_out: int):
        self.fade_in = fade_in
        self.fade_out = fade_out
        self.position = 0
        self.held = np.zeros(0, dtype=np.float32)

    def push(self, chunk: np.ndarray) -> np.ndarray:
        chunk = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if self.position < self.fade_in:
            ramp = _ramp(self.fade_in)[self.position : self.position + len(chunk)]
            chunk = chunk.copy()
            chunk[: len(ramp)] *= ramp
        self.position += len(chunk)
        if not self.fade_out:
            return chunk
        joined = np.concatenate([self.held, chunk])
        cut = max(0, len(joined) - self.fade_out)
        self.held = joined[cut:]
        return joined[:cut]

    def finish(self) -> np.ndarray:
        if not self.fade_out or not self.held.size:
            return self.held
        return self.held * _ramp(self.fade_out)[::-1][-len(self.held) :]


@functools.lru_cache(maxsize=8)
def _ramp(length: int) -> np.ndarray:
    """A raised-cosine rise from near 0 to near 1 over `length` samples."""
    return (0.5 - 0.5 * np.cos(np.pi * (np.arange(length) + 0.5) / length)).astype(np.float32)
