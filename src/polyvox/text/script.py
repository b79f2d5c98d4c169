"""Which writing systems a text uses (Latin, CJK, other), so an engine can refuse text it cannot speak.

Only letters count: digits, punctuation (including full-width CJK punctuation), symbols and emoji
belong to no script, so "Hello, world! 42 🎉" is purely Latin. Letters used as symbols count as
symbols too: a lone Greek letter ("π", "α-helix", "Ω"), µ, and letter-like signs such as ℓ.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from enum import StrEnum


class Script(StrEnum):
    LATIN = "latin"
    CJK = "cjk"
    OTHER = "other"


_SYMBOL_LETTERS = frozenset("µªº")
_CJK_NAME_PREFIXES = (
    "CJK ",
    "IDEOGRAPHIC",
    "HIRAGANA",
    "KATAKANA",
    "HANGUL",
    "BOPOMOFO",
    "HALFWIDTH KATAKANA",
)


def char_script(char: str) -> Script | None:
    """The script of one character, or None when it is not a letter (or is a letter-like symbol)."""
    if not unicodedata.category(char).startswith("L") or char in _SYMBOL_LETTERS:
        return None
    if 0x2100 <= ord(char) <= 0x214F:  # letter-like symbols: ℓ, №, ℃, K (Kelvin) ...
        return None
    name = unicodedata.name(char, "")
    if name.startswith("LATIN") or name.startswith("FULLWIDTH LATIN"):
        return Script.LATIN
    if name.startswith(_CJK_NAME_PREFIXES) or _is_cjk_codepoint(ord(char)):
        return Script.CJK
    return Script.OTHER


def detect_scripts(text: str) -> frozenset[Script]:
    """Every script used by a letter of `text` (empty for text without letters)."""
    return frozenset(script for _, script in _letters(text))


def foreign_letters(text: str, allowed: frozenset[Script] = frozenset({Script.LATIN})) -> str:
    """The distinct letters of `text` outside `allowed`, in order of first appearance."""
    seen: dict[str, None] = {}
    for char, script in _letters(text):
        if script not in allowed:
            seen.setdefault(char, None)
    return "".join(seen)


def _letters(text: str) -> Iterator[tuple[str, Script]]:
    """Each letter of `text` with its script, skipping lone Greek letters (symbols such as π or α)."""
    for index, char in enumerate(text):
        script = char_script(char)
        if script is None:
            continue
        if _is_greek(char) and not (_is_letter(text, index - 1) or _is_letter(text, index + 1)):
            continue
        yield char, script


def _is_letter(text: str, index: int) -> bool:
    return 0 <= index < len(text) and unicodedata.category(text[index]).startswith("L")


def _is_greek(char: str) -> bool:
    return unicodedata.name(char, "").startswith("GREEK")


def _is_cjk_codepoint(code: int) -> bool:
    return 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x3134F
