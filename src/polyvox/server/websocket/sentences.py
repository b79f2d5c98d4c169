"""Where a WebSocket session's incoming text ends its sentences: `SentenceBuffer` holds text arriving
in pieces and hands out each sentence once its end has arrived (a run-on is cut at a soft break).
Sentence ends are `polyvox.text.split`'s, read as text still arriving."""

from __future__ import annotations

import re

from polyvox.text.frontend import has_words
from polyvox.text.split import CLAUSE_MARKS, sentence_ends

_SOFT_BREAK = re.compile(rf"[{re.escape(CLAUSE_MARKS)}]\s*|\s+")


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
        for end in sentence_ends(self.text, complete=False):
            out.append(self.text[start:end])
            start = end
        self.text = self.text[start:]
        while len(self.text) > self.max_chars:
            cut = _soft_cut(self.text, self.max_chars)
            out.append(self.text[:cut])
            self.text = self.text[cut:]
        # A sentence with nothing to say (the text front end's rule) is skipped, not refused: text still
        # arriving may carry stray punctuation between sentences.
        return [sentence.strip() for sentence in out if has_words(sentence)]

    def flush(self) -> str | None:
        """Everything buffered, as one sentence (None when there is nothing to say)."""
        text, self.text = self.text.strip(), ""
        return text if has_words(text) else None

    def clear(self) -> None:
        self.text = ""


def _soft_cut(text: str, limit: int) -> int:
    """Where to cut a run-on: after the last clause mark or space before `limit`, else at it."""
    cuts = [m.end() for m in _SOFT_BREAK.finditer(text, 0, limit) if m.end() <= limit]
    return cuts[-1] if cuts and cuts[-1] > limit // 2 else limit
