"""The client's words for the words an engine spoke: `ClientWords` maps the spoken words of every piece
(the text front end's output: lexicon, then normalisation, split on whitespace) back to the tokens of
the text the client sent, and turns each piece's spoken-word spans into the client's `WordTiming`s.

The map is a diff over tokens (difflib): a token the front end left alone maps to its spoken word one to
one; a run it changed ("5 kg" spoken "five kilograms", a lexicon replacement) maps as one entry, the
client's tokens joined, spanning its spoken words; a client token with nothing spoken for it joins the
entry before it (the one after it at the start); a spoken word the client did not write widens the
entry before it. Tokens are compared by their letters and digits, case folded, so punctuation moved by
the front end ("(aside)" spoken "aside,") still counts as unchanged."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from polyvox.alignment.aligners import Span
from polyvox.alignment.timeline import PieceTiming
from polyvox.alignment.words import WordTiming


@dataclass(frozen=True)
class Entry:
    """One word the client sent (or a run of them, joined by spaces), spoken as the spoken words
    `first` to `last` (indices over the whole answer, inclusive)."""

    word: str
    first: int
    last: int


def _key(token: str) -> str:
    letters = "".join(char for char in token.casefold() if char.isalnum())
    return letters or token


def map_tokens(client: Sequence[str], spoken: Sequence[str]) -> list[Entry]:
    """The entries of `client`'s tokens over `spoken`'s, in order, together covering every spoken word
    once (see the module docstring); none when nothing was spoken."""
    if not spoken:
        return []
    matcher = difflib.SequenceMatcher(None, [_key(t) for t in client], [_key(t) for t in spoken], False)
    entries: list[Entry] = []
    orphans: list[str] = []  # client tokens with nothing spoken, waiting for an entry to join
    lead: int | None = None  # spoken words before the first entry, waiting for it to begin there

    def add(words: Sequence[str], first: int, last: int) -> None:
        nonlocal orphans, lead
        entries.append(Entry(" ".join([*orphans, *words]), first if lead is None else lead, last))
        orphans, lead = [], None

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                add([client[i1 + offset]], j1 + offset, j1 + offset)
        elif tag == "replace":
            add(client[i1:i2], j1, j2 - 1)
        elif tag == "delete":
            if entries:
                last = entries[-1]
                entries[-1] = Entry(" ".join([last.word, *client[i1:i2]]), last.first, last.last)
            else:
                orphans.extend(client[i1:i2])
        elif entries:  # insert: spoken words the client did not write widen the entry before them
            last = entries[-1]
            entries[-1] = Entry(last.word, last.first, j2 - 1)
        elif orphans:  # ... or, at the start, the client's words left unspoken before them
            add([], j1, j2 - 1)
        else:  # ... or the first entry after them
            lead = j1
    if orphans and entries:  # client tokens after the last spoken word
        last = entries[-1]
        entries[-1] = Entry(" ".join([last.word, *orphans]), last.first, last.last)
    return [entry for entry in entries if entry.word] or _whole(client, spoken)


def _whole(client: Sequence[str], spoken: Sequence[str]) -> list[Entry]:
    """The fallback of a map that found no word of the client's: the whole text as one entry."""
    return [Entry(" ".join(client) or " ".join(spoken), 0, len(spoken) - 1)]


class ClientWords:
    """The client's words of one answer, timed piece by piece as each piece's spoken words are.

    `piece(index, start, end, spans)` takes piece `index`'s bounds (seconds on the engine's clock) and one
    `Span` per spoken word of it (seconds from the piece's first sample) and returns its `PieceTiming`:
    the entries whose last spoken word is in it. Pieces come in order."""

    def __init__(self, client_text: str, pieces: Sequence[str]):
        self.spoken = [piece.split() for piece in pieces]
        flat = [token for words in self.spoken for token in words]
        self.entries = map_tokens(client_text.split(), flat)
        self._first: list[int] = []  # each piece's first spoken word, over the whole answer
        count = 0
        for words in self.spoken:
            self._first.append(count)
            count += len(words)
        self._times: list[Span] = []  # every spoken word timed so far, on the engine's clock
        self._next = 0  # the first entry not reported yet

    def words_of(self, index: int) -> list[str]:
        """Piece `index`'s spoken words, as an aligner takes them."""
        return self.spoken[index]

    def piece(self, index: int, start: float, end: float, spans: Sequence[Span]) -> PieceTiming:
        if len(spans) != len(self.spoken[index]) or len(self._times) != self._first[index]:
            raise ValueError(f"piece {index}: {len(spans)} spans for {len(self.spoken[index])} words")
        for span in spans:
            begin = min(max(start + span.start, start), end)
            self._times.append(Span(begin, min(max(start + span.end, begin), end), span.approximate))
        words: list[WordTiming] = []
        while self._next < len(self.entries) and self.entries[self._next].last < len(self._times):
            entry = self.entries[self._next]
            times = self._times[entry.first : entry.last + 1]
            approximate = any(span.approximate for span in times)
            words.append(WordTiming(entry.word, times[0].start, times[-1].end, approximate))
            self._next += 1
        text = " ".join(word.word for word in words)
        return PieceTiming(index, text, start, end, tuple(words))
