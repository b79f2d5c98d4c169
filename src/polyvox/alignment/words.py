"""`WordTiming`: one word of the client's text and when it is heard, in seconds on the answer's own clock
(0 is its first sample), after speed and the seams between pieces: what every protocol reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class WordTiming:
    """`word` is the client's text (before normalisation: "5 kg" stays one word); `approximate` marks
    times shared out by spoken length rather than found in the audio."""

    word: str
    start: float
    end: float
    approximate: bool = False

    def as_json(self) -> dict[str, object]:
        """OpenAI's transcription shape (`word`, `start`, `end`), `approximate` only where true."""
        body: dict[str, object] = {
            "word": self.word,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
        }
        if self.approximate:
            body["approximate"] = True
        return body


def shifted(words: Iterable[WordTiming], offset: float) -> list[WordTiming]:
    """The words `offset` seconds later (a piece's words on the answer's clock)."""
    return [replace(w, start=w.start + offset, end=w.end + offset) for w in words]


def scaled(words: Iterable[WordTiming], factor: float) -> list[WordTiming]:
    """The words with every time multiplied by `factor` (1 / speed for audio stretched after timing)."""
    return [replace(w, start=w.start * factor, end=w.end * factor) for w in words]
