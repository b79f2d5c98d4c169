"""The text front end: what a request's `input` becomes before an engine speaks it.

`TextFrontend.prepare` applies the lexicon, normalises (unless the request turned it off), splits
the text into pieces an engine handles well, and makes sure no piece starts with a parenthesis.

Why the parenthesis: VoxCPM2 reads a leading "(description)" as a voice-design instruction, and in
polyvox that prefix comes only from the request's `instructions` (the VoxCPM2 engine adds it).
Input text is always read aloud, so a piece whose first visible character is an opening
parenthesis ("(" "（" and their small, superscript and subscript forms) loses that parenthesis, and
its matching closing one becomes a comma: "(whispering) hello" is spoken as "whispering, hello",
"（笑）你好" as "笑，你好". This repeats until the piece starts with something else, so "((a)) b"
and "(a)(b) c" are covered too. Invisible characters in front (spaces, zero-width spaces, the
byte-order mark) are removed first so they cannot hide a parenthesis. Every piece is checked, not
only the first, since each piece is a separate generation.
"""

from __future__ import annotations

from polyvox.text.lexicon import Lexicon
from polyvox.text.normalize import normalize_text
from polyvox.text.split import DEFAULT_MAX_CHARS, DEFAULT_MIN_CHARS, split_sentences

_PAIRS = {"(": ")", "（": "）", "﹙": "﹚", "⁽": "⁾", "₍": "₎"}
_FULL_WIDTH_OPENERS = frozenset("（﹙")
_INVISIBLE = " \t\r\n\f\v\u00a0\u200b\u200c\u200d\u2060\ufeff\u3000"
_ASIDE_END_MARKS = frozenset(",.!?;:…，。！？；：、")


class TextFrontend:
    """Lexicon → normalisation → sentence split → leading-parenthesis neutralisation."""

    def __init__(
        self,
        lexicon: Lexicon | None = None,
        normalize_default: bool = True,
        max_piece_chars: int = DEFAULT_MAX_CHARS,
        min_piece_chars: int = DEFAULT_MIN_CHARS,
    ):
        if max_piece_chars < 1:
            raise ValueError("max_piece_chars must be at least 1")
        self.lexicon = lexicon
        self.normalize_default = normalize_default
        self.max_piece_chars = max_piece_chars
        self.min_piece_chars = min_piece_chars

    def prepare(self, text: str, normalize: bool | None = None) -> list[str]:
        """The pieces to speak, in order, each at most `max_piece_chars` long and none starting with "(".

        Pieces without a letter or digit (stray punctuation) are dropped: there is nothing in them to
        say. Normalisation can take a while on long text; call this off the event loop.
        """
        if self.lexicon is not None:
            text = self.lexicon.apply(text)
        if self.normalize_default if normalize is None else normalize:
            text = normalize_text(text)
        pieces = []
        for piece in split_sentences(text, self.max_piece_chars, self.min_piece_chars):
            piece = neutralize_leading_parenthesis(piece)
            if has_words(piece):
                pieces.append(piece)
        return pieces


def has_words(text: str) -> bool:
    """Whether `text` has anything to say: a letter or a digit. A request whose pieces have none is
    refused (`EmptyInput`), whatever the back end."""
    return any(char.isalnum() for char in text)


def neutralize_leading_parenthesis(text: str) -> str:
    """`text` without a leading parenthesised aside marker; the words inside are kept (see module doc)."""
    text = text.lstrip(_INVISIBLE)
    while text and text[0] in _PAIRS:
        close = _find_close(text, _PAIRS[text[0]])
        if close < 0:
            text = text[1:].lstrip(_INVISIBLE)
            continue
        aside, rest = text[1:close].strip(_INVISIBLE), text[close + 1 :].lstrip(_INVISIBLE)
        if aside and rest and aside[-1] not in _ASIDE_END_MARKS and rest[0] not in _ASIDE_END_MARKS:
            aside += "，" if text[0] in _FULL_WIDTH_OPENERS else ","
        spaced = aside and rest and aside[-1].isascii() and rest[0] not in _ASIDE_END_MARKS
        sep = " " if spaced else ""
        text = (aside + sep + rest).lstrip(_INVISIBLE)
    return text


def _find_close(text: str, close: str) -> int:
    """Index of the parenthesis closing the one at `text[0]`, or -1."""
    depth = 0
    for index, char in enumerate(text):
        if char == text[0]:
            depth += 1
        elif char == close:
            depth -= 1
            if depth == 0:
                return index
    return -1
