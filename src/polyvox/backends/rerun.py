"""The one policy for running a request again after the back end lost it (the engine process serving it
died): what is run again, when, and how often. Two losses, told apart by the back end:

- `PieceLost`: none of the piece's audio had come back. `sent` sends the piece again as it is (its
  seed kept, so it is the same audio), up to `PIECE_SENDS` sends, so an input that kills every engine
  process it reaches stops there. Nothing of the piece was passed on, so this holds mid-answer too.
- `AudioLost`: some of the piece's audio had come back. `opened` runs the whole answer again from its
  start, its seed kept, while none of it has been passed on (a stream's first bytes, a file's end, a
  voice's frozen clip); up to `ANSWER_RUNS` runs. After that a loss fails the answer, as any
  `BackendError`.

The text step sends every piece through `sent`; the speech service and the voice freeze open every answer
through `opened`. The engine only says how it lost a request; it sends nothing again itself."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

import numpy as np

from polyvox.backends.base import Backend, SynthesisRequest
from polyvox.backends.errors import AudioLost, PieceLost

log = logging.getLogger(__name__)

T = TypeVar("T")

PIECE_SENDS = 3  # a piece's first send and two more, each after the engine process holding it died
# An answer's runs at most, while none of it was passed on: its first, and one more after an engine
# process died under it holding some of its audio (two deaths in one answer are rare).
ANSWER_RUNS = 2


async def sent(backend: Backend, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
    """The piece's chunks from `backend`, the piece sent again (the same request) each time the back end
    lost it before any of its audio came back, up to `PIECE_SENDS` sends. Which loss it was is the back
    end's to say (`PieceLost` only before any audio); a loss after some audio ends the piece with
    `AudioLost`, for `opened` to decide."""
    for send in range(1, PIECE_SENDS + 1):
        chunks = backend.generate(request)
        try:
            async for chunk in chunks:
                yield chunk
            return
        except PieceLost as exc:
            if send == PIECE_SENDS:
                raise
            log.info("request %s (piece %s) sent again: %s", request.request_id, request.piece, exc)
        finally:
            await chunks.aclose()


async def opened(
    run: Callable[[], AsyncGenerator[T, None]], again: Callable[[AudioLost], None]
) -> tuple[T | None, AsyncGenerator[T, None]]:
    """The first item of `run()` (None when it makes none) and the generator for the rest. Until that
    first item nothing of the answer has been passed on, so one the back end lost part of (`AudioLost`)
    is run again from its start (`run()` once more; `again(loss)` is told first), up to `ANSWER_RUNS`
    runs. After its first item a loss fails the answer."""
    for answer_run in range(1, ANSWER_RUNS + 1):
        items = run()
        try:
            return await anext(items, None), items
        except AudioLost as exc:
            await items.aclose()
            if answer_run == ANSWER_RUNS:
                raise
            again(exc)
        except BaseException:
            await items.aclose()
            raise
    raise AssertionError("unreachable")
