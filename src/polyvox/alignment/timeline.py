"""`Timeline`: the pieces of one answer with their words, as they become known while it is spoken
(`PieceTiming`: the client's text of a piece, its bounds and its words), for every protocol to read;
and the pieces as bytes for the audio cache (`pieces_to_bytes`, `pieces_from_bytes`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from polyvox.alignment.words import WordTiming, scaled, shifted


@dataclass(frozen=True)
class PieceTiming:
    """Piece `index` of an answer (a sentence, as the text front end split it): `text` is the client's
    words heard in it (before normalisation), `start`/`end` its bounds and `words` its words, all in
    seconds on the answer's clock."""

    index: int
    text: str
    start: float
    end: float
    words: tuple[WordTiming, ...]

    def as_json(self) -> dict[str, object]:
        """The segment shape of OpenAI's transcriptions: `id`, `start`, `end`, `text`."""
        return {"id": self.index, "start": round(self.start, 3), "end": round(self.end, 3), "text": self.text}

    def scaled(self, factor: float) -> PieceTiming:
        """Every time multiplied by `factor` (1 / speed for audio stretched after it was timed)."""
        return replace(
            self, start=self.start * factor, end=self.end * factor, words=tuple(scaled(self.words, factor))
        )

    def shifted(self, offset: float) -> PieceTiming:
        """Every time `offset` seconds later (an answer's pieces on a session's clock)."""
        return replace(
            self, start=self.start + offset, end=self.end + offset, words=tuple(shifted(self.words, offset))
        )


class Timeline:
    """The pieces of one answer in order, added as each is timed; readers `take` the ones new to them.

    `scale` turns the times added (the engine's clock) into the answer's (1 / the speed the output
    pipeline stretches by); `engine_pieces` keeps them as added, for the audio cache."""

    def __init__(self, scale: float = 1.0):
        self.scale = scale
        self.engine_pieces: list[PieceTiming] = []
        self.pieces: list[PieceTiming] = []
        self.complete = False  # every piece of the answer is here
        self._taken = 0

    def add(self, piece: PieceTiming) -> None:
        """A piece timed on the engine's clock (pieces come in order)."""
        self.engine_pieces.append(piece)
        self.pieces.append(piece.scaled(self.scale) if self.scale != 1.0 else piece)

    def extend(self, pieces: Iterable[PieceTiming]) -> None:
        for piece in pieces:
            self.add(piece)

    def clear(self) -> None:
        """Forget every piece (an answer run again from its start before any of it went out)."""
        self.engine_pieces.clear()
        self.pieces.clear()
        self.complete = False
        self._taken = 0

    def take(self) -> list[PieceTiming]:
        """The pieces added since the last `take`, in order."""
        new = self.pieces[self._taken :]
        self._taken = len(self.pieces)
        return new

    @property
    def words(self) -> list[WordTiming]:
        """Every word known so far, in order, on the answer's clock."""
        return [word for piece in self.pieces for word in piece.words]


def pieces_to_bytes(pieces: Sequence[PieceTiming]) -> bytes:
    """The pieces as compact JSON (the audio cache keeps them with the audio)."""
    rows = [
        [p.index, p.text, p.start, p.end, [[w.word, w.start, w.end, w.approximate] for w in p.words]]
        for p in pieces
    ]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode()


def pieces_from_bytes(data: bytes) -> tuple[PieceTiming, ...] | None:
    """The pieces `pieces_to_bytes` wrote; None for bytes that are not such pieces (a damaged entry)."""
    try:
        return tuple(
            PieceTiming(
                int(index),
                str(text),
                float(start),
                float(end),
                tuple(WordTiming(str(w), float(a), float(b), bool(x)) for w, a, b, x in words),
            )
            for index, text, start, end, words in json.loads(data)
        )
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
