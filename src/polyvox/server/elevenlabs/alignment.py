"""ElevenLabs' character alignment, derived from word timings: every character of the text the client
sent gets a start and an end. A word's characters share its span evenly; the characters between words
(spaces, punctuation the words do not carry) share the gap between them; those before the first word
start at 0, and the last character ends where the audio does. Two shapes: the HTTP one (`characters`,
`character_start_times_seconds`, `character_end_times_seconds`) and the socket one (`chars`,
`charStartTimesMs`, `charDurationsMs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from polyvox.alignment.words import WordTiming


@dataclass(frozen=True)
class CharacterTimes:
    """Each character of `text` and its start and end in seconds."""

    chars: list[str]
    starts: list[float]
    ends: list[float]
    settled: int = 0  # the leading characters whose times no later word can change (up to the last word)

    def as_http(self) -> dict[str, object]:
        return {
            "characters": self.chars,
            "character_start_times_seconds": [round(t, 3) for t in self.starts],
            "character_end_times_seconds": [round(t, 3) for t in self.ends],
        }

    def as_socket(self, offset_s: float = 0.0) -> dict[str, object]:
        """The socket shape in whole milliseconds, `offset_s` later (a segment's times on the clock the
        client reads them in)."""
        starts = [round((t + offset_s) * 1000) for t in self.starts]
        ends = [round((t + offset_s) * 1000) for t in self.ends]
        return {
            "chars": self.chars,
            "charStartTimesMs": starts,
            "charDurationsMs": [max(0, end - start) for start, end in zip(starts, ends, strict=True)],
        }

    def shifted(self, offset_s: float) -> CharacterTimes:
        return CharacterTimes(
            self.chars, [t + offset_s for t in self.starts], [t + offset_s for t in self.ends], self.settled
        )

    def part(self, first: int, stop: int | None = None) -> CharacterTimes:
        """Characters [first, stop)."""
        stop = len(self.chars) if stop is None else stop
        return CharacterTimes(self.chars[first:stop], self.starts[first:stop], self.ends[first:stop])

    def __add__(self, other: CharacterTimes) -> CharacterTimes:
        return CharacterTimes(
            self.chars + other.chars, self.starts + other.starts, self.ends + other.ends, len(self.chars)
        )


EMPTY = CharacterTimes([], [], [])


def character_times(text: str, words: Sequence[WordTiming], audio_end: float | None = None) -> CharacterTimes:
    """`text`'s characters timed by `words` (the client's words of `text`, in order); a word not found
    in what is left of the text is skipped. `audio_end`: where the last characters end (default: the
    last word's end)."""
    spans: list[tuple[int, int, float, float]] = []  # (first char, end char, start, end)
    at = 0
    for word in words:
        found = text.find(word.word, at) if word.word else -1
        if found < 0:
            continue
        spans.append((found, found + len(word.word), word.start, word.end))
        at = found + len(word.word)
    starts = [0.0] * len(text)
    ends = [0.0] * len(text)
    last_end = spans[-1][3] if spans else 0.0
    end_of_audio = max(audio_end if audio_end is not None else last_end, last_end)
    previous_char, previous_time = 0, 0.0
    for first, stop, start, end in spans:
        _share(starts, ends, previous_char, first, previous_time, max(start, previous_time))
        _share(starts, ends, first, stop, max(start, previous_time), max(end, start, previous_time))
        previous_char, previous_time = stop, max(end, start, previous_time)
    _share(starts, ends, previous_char, len(text), previous_time, end_of_audio)
    if ends:  # the last character holds to the audio's end, so a client's running clock stays exact
        ends[-1] = max(ends[-1], end_of_audio)
    return CharacterTimes(list(text), starts, ends, spans[-1][1] if spans else 0)


def _share(starts: list[float], ends: list[float], first: int, stop: int, start: float, end: float) -> None:
    """Characters [first, stop) share [start, end] evenly, in order."""
    count = stop - first
    if count <= 0:
        return
    step = (end - start) / count
    for i in range(count):
        starts[first + i] = start + i * step
        ends[first + i] = start + (i + 1) * step
