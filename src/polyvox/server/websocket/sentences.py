"""Where a WebSocket session's incoming text ends its sentences: `SentenceBuffer` holds text arriving
in pieces and hands out each sentence once its end has arrived (a run-on is cut at a soft break)."""

from __future__ import annotations

import re

# Where a sentence ends in text that is still arriving: CJK ends at once; ASCII ends only once the
# whitespace after them has arrived (so "3." of "3.5" or "..." in progress is not cut); line breaks.
_CLOSERS = "\"'”’)]}）】」』》"
_BOUNDARY = re.compile(
    rf"[。！？；]+[{re.escape(_CLOSERS)}]*|[.!?;…]+[{re.escape(_CLOSERS)}]*(?=\s)|\n",
)
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e"})
_SOFT_BREAK = re.compile(r"[,，、:：]\s*|\s+")


class SentenceBuffer:
    """Text arriving in pieces, handed out a sentence at a time."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.text = ""

    def push(self, text: str) -> list[str]:
        """Append `text`; return the sentences it completed (a run-on past `max_chars` is cut too)."""
        self.text += text
        out: list[str] = []
        start = 0
        for match in _BOUNDARY.finditer(self.text):
            if match.group().startswith(".") and _abbreviation(self.text[start : match.start()]):
                continue
            out.append(self.text[start : match.end()])
            start = match.end()
        self.text = self.text[start:]
        while len(self.text) > self.max_chars:
            cut = _soft_cut(self.text, self.max_chars)
            out.append(self.text[:cut])
            self.text = self.text[cut:]
        return [sentence.strip() for sentence in out if _speakable(sentence)]

    def flush(self) -> str | None:
        """Everything buffered, as one sentence (None when there is nothing to say)."""
        text, self.text = self.text.strip(), ""
        return text if _speakable(text) else None

    def clear(self) -> None:
        self.text = ""


def _abbreviation(before: str) -> bool:
    words = before.split()
    return bool(words) and words[-1].lower() in _ABBREVIATIONS


def _soft_cut(text: str, limit: int) -> int:
    """Where to cut a run-on: after the last clause mark or space before `limit`, else at it."""
    cuts = [m.end() for m in _SOFT_BREAK.finditer(text, 0, limit) if m.end() <= limit]
    return cuts[-1] if cuts and cuts[-1] > limit // 2 else limit


def _speakable(text: str) -> bool:
    return any(char.isalnum() for char in text)
