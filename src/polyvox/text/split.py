"""Sentence splitting for English and Chinese text: the pieces an engine synthesises one at a time.

`split_sentences` cuts at sentence ends (. ! ? ; … and 。！？；) and line breaks, keeps each
sentence's punctuation (and closing quotes or brackets) with it, merges fragments that are too
short to say on their own, and cuts sentences longer than `max_chars` at clause marks
(, ， 、 : ：), then at whitespace, and as a last resort anywhere, so no piece exceeds it.

`sentence_ends` is the one definition of where a sentence ends (and which abbreviations do not end
one): normalisation's pieces for its grammar and the WebSocket's buffer of arriving text use it too.
"""

from __future__ import annotations

import re

DEFAULT_MAX_CHARS = 200
DEFAULT_MIN_CHARS = 8

# Marks that end a sentence wherever they stand (CJK) or only before whitespace/end (ASCII).
_CJK_ENDS = "。！？；"
_ASCII_ENDS = ".!?;…"
_CLOSERS = "\"'”’)]}）】」』》"

CLAUSE_MARKS = ",，、:："

_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "a.m", "p.m",
    "no", "fig", "approx", "dept", "inc", "ltd", "co", "mt",
})  # fmt: skip

# An ASCII end counts once whitespace follows it: in complete text the end of the text also counts;
# in text still arriving it does not ("3." may be "3.5", "." may become "..." or '."').
_SENTENCE_END = re.compile(
    rf"(?:[{_CJK_ENDS}]+|[{re.escape(_ASCII_ENDS)}]+(?=[{re.escape(_CLOSERS)}]*(?:\s|$)))"
    rf"[{re.escape(_CLOSERS)}]*"
)
_ARRIVING_SENTENCE_END = re.compile(
    rf"(?:[{_CJK_ENDS}]+|[{re.escape(_ASCII_ENDS)}]+(?=[{re.escape(_CLOSERS)}]*\s))"
    rf"[{re.escape(_CLOSERS)}]*|\n"
)
_CLAUSE_END = re.compile(rf"[{re.escape(CLAUSE_MARKS)}][{re.escape(_CLOSERS)}]*")
_WHITESPACE = re.compile(r"\s+")


def split_sentences(
    text: str, max_chars: int = DEFAULT_MAX_CHARS, min_chars: int = DEFAULT_MIN_CHARS
) -> list[str]:
    """Split `text` into sentence-sized pieces of at most `max_chars` characters, in order.

    Whitespace runs inside a piece collapse to one space; empty lines disappear. Concatenating
    the pieces gives back every non-whitespace character of `text`, in order.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    pieces: list[str] = []
    for line in text.splitlines():
        for sentence in _sentences(_WHITESPACE.sub(" ", line).strip()):
            pieces.extend(_fit(sentence, max_chars))
    return _merge_short(pieces, max_chars, min_chars)


def sentence_ends(text: str, *, complete: bool = True) -> list[int]:
    """The offsets just past each sentence end in `text` (its closing quotes or brackets included),
    leaving abbreviations such as "Dr." and initials inside their sentence.

    With `complete` False the text is still arriving: an ASCII end counts only once the whitespace
    after it is there, and a line break ends a sentence. The text after the last offset is the
    sentence still open.
    """
    pattern = _SENTENCE_END if complete else _ARRIVING_SENTENCE_END
    ends: list[int] = []
    start = 0
    for match in pattern.finditer(text):
        if match.group().startswith(".") and _is_abbreviation(text[start : match.start()]):
            continue
        ends.append(match.end())
        start = match.end()
    return ends


def clause_ends(text: str) -> list[int]:
    """The offsets just past each clause mark (, ， 、 : ：) in `text`, closers included."""
    return [match.end() for match in _CLAUSE_END.finditer(text)]


def _sentences(line: str) -> list[str]:
    """Cut one line at sentence ends."""
    return _cut_at(line, sentence_ends(line))


def _is_abbreviation(before_dot: str) -> bool:
    words = before_dot.split()
    word = words[-1].lower() if words else ""
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _fit(sentence: str, max_chars: int) -> list[str]:
    """Cut a sentence longer than `max_chars` at clause marks, then whitespace, then anywhere."""
    if len(sentence) <= max_chars:
        return [sentence]
    clauses = _cut_at(sentence, clause_ends(sentence))
    if len(clauses) > 1:
        return [piece for clause in _pack(clauses, max_chars) for piece in _fit(clause, max_chars)]
    words = sentence.split(" ")
    if len(words) > 1:
        return [piece for chunk in _pack(words, max_chars, " ") for piece in _fit(chunk, max_chars)]
    return [sentence[i : i + max_chars] for i in range(0, len(sentence), max_chars)]


def _cut_at(text: str, ends: list[int]) -> list[str]:
    """Cut `text` at the offsets `ends` (each mark stays with the text before it), stripped."""
    bounds = [0, *ends, len(text)]
    out = (text[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False))
    return [s for s in out if s]


def _pack(parts: list[str], max_chars: int, sep: str | None = None) -> list[str]:
    """Greedily join consecutive parts while the result stays within `max_chars`.

    Without an explicit `sep`, parts join with a space unless either side is CJK.
    """
    packed: list[str] = []
    for part in parts:
        if packed:
            joined = _join(packed[-1], part, sep)
            if len(joined) <= max_chars:
                packed[-1] = joined
                continue
        packed.append(part)
    return packed


def _merge_short(pieces: list[str], max_chars: int, min_chars: int) -> list[str]:
    """Merge pieces that say less than `min_chars` into a neighbour when the result still fits.

    A CJK character is a syllable, about as much as two or three Latin letters, so it weighs two.
    """
    merged: list[str] = []
    for piece in pieces:
        if merged and (_weight(merged[-1]) < min_chars or _weight(piece) < min_chars):
            joined = _join(merged[-1], piece)
            if len(joined) <= max_chars:
                merged[-1] = joined
                continue
        merged.append(piece)
    return merged


def _weight(text: str) -> int:
    return sum(2 if _is_cjk(char) else 1 for char in text)


def _join(left: str, right: str, sep: str | None = None) -> str:
    if sep is None:
        sep = "" if _is_cjk(left[-1]) or _is_cjk(right[0]) else " "
    return left + sep + right


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x2E80 <= code <= 0x9FFF  # radicals, CJK punctuation, kana, bopomofo, unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms (，！？：)
        or 0x20000 <= code <= 0x3134F  # extension ideographs
    )
