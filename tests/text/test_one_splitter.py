"""The three places that cut text into sentences (the long-text splitter, the WebSocket's buffer of
arriving text, and normalisation's pieces for the grammar) agree on where sentences end."""

from __future__ import annotations

import pytest

from polyvox.server.websocket.sentences import SentenceBuffer
from polyvox.text.normalize import grammar_pieces
from polyvox.text.split import split_sentences

TEXTS = [
    # abbreviations and initials stay inside their sentence; a decimal point is no end
    "Dr. Smith met Mrs. Jones at 3.5 p.m. today. They talked, e.g. of J. R. R. Tolkien! Why? Fig. 2 says so.",
    # ellipses, closing quotes and brackets stay with their sentence
    'Wait for it… Really?! Yes... it happened. She said "Go home." Then she left. (It was late.) Done; over.',
    # Chinese ends cut at once, mixed with English
    "今天天气很好。我们去公园吧！你想一起来吗？好的；走吧。He said OK. 然后走了。",
]


def _websocket(text: str, chunk: int) -> list[str]:
    buffer = SentenceBuffer(max_chars=10_000)
    out: list[str] = []
    for i in range(0, len(text), chunk):
        out += buffer.push(text[i : i + chunk])
    rest = buffer.flush()
    return out + ([rest] if rest else [])


@pytest.mark.parametrize("text", TEXTS)
def test_every_caller_ends_sentences_at_the_same_places(text: str) -> None:
    split = split_sentences(text, max_chars=10_000, min_chars=1)
    assert len(split) >= 4  # the text has sentences to cut
    for chunk in (1, 7, len(text)):  # arriving a character at a time, in pieces, or at once
        assert _websocket(text, chunk) == split
    assert [piece for piece, _ in grammar_pieces(text)] == split


def test_the_same_abbreviations_hold_everywhere() -> None:
    text = "Prof. Lee of Acme Inc. spoke at approx. noon. St. Mark's Co. hosted it."
    expected = ["Prof. Lee of Acme Inc. spoke at approx. noon.", "St. Mark's Co. hosted it."]
    assert split_sentences(text, max_chars=10_000, min_chars=1) == expected
    assert _websocket(text, 3) == expected
    assert [piece for piece, _ in grammar_pieces(text)] == expected
