"""Which writing systems a text uses (Latin, CJK, other), so an engine can refuse text it cannot speak.

Only letters count: digits, punctuation (including full-width CJK punctuation), symbols and emoji
belong to no script, so "Hello, world! 42 🎉" is purely Latin.
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum


class Script(StrEnum):
    LATIN = "latin"
    CJK = "cjk"
    OTHER = "other"


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
    """The script of one character, or None when it is not a letter."""
    if not unicodedata.category(char).startswith("L"):
        return None
    name = unicodedata.name(char, "")
    if name.startswith("LATIN") or name.startswith("FULLWIDTH LATIN"):
        return Script.LATIN
    if name.startswith(_CJK_NAME_PREFIXES) or _is_cjk_codepoint(ord(char)):
        return Script.CJK
    return Script.OTHER


def detect_scripts(text: str) -> frozenset[Script]:
    """Every script used by a letter of `text` (empty for text without letters)."""
    return frozenset(s for s in map(char_script, text) if s is not None)


def foreign_letters(text: str, allowed: frozenset[Script] = frozenset({Script.LATIN})) -> str:
    """The distinct letters of `text` outside `allowed`, in order of first appearance."""
    seen: dict[str, None] = {}
    for char in text:
        script = char_script(char)
        if script is not None and script not in allowed:
            seen.setdefault(char, None)
    return "".join(seen)


def _is_cjk_codepoint(code: int) -> bool:
    return 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x3134F
