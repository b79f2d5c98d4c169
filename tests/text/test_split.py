"""Sentence splitting: where English and Chinese text is cut, and that nothing is lost or too long."""

from __future__ import annotations

import re

import pytest

from polyvox.text.split import split_sentences


def non_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_english_sentences_keep_their_punctuation():
    assert split_sentences("Hello there, friend. How are you today? I am fine! Thank you; see you soon.") == [
        "Hello there, friend.",
        "How are you today?",
        "I am fine!",
        "Thank you;",
        "see you soon.",
    ]


def test_chinese_sentences_split_without_spaces_and_short_ones_merge():
    assert split_sentences("今天天气很好。我们去公园吧！你想一起来吗？好的；走吧。") == [
        "今天天气很好。",
        "我们去公园吧！",
        "你想一起来吗？好的；走吧。",
    ]


def test_ellipsis_and_repeated_marks_stay_together():
    assert split_sentences("Wait for it… Really?! Yes... it happened.") == [
        "Wait for it…",
        "Really?! Yes...",
        "it happened.",
    ]


def test_closing_quotes_and_brackets_stay_with_their_sentence():
    assert split_sentences('She said "Go home." Then she left. (It was late.) 他说：“好。”然后走了。') == [
        'She said "Go home."',
        "Then she left.",
        "(It was late.)",
        "他说：“好。”",
        "然后走了。",
    ]


def test_decimals_abbreviations_and_initials_do_not_end_a_sentence():
    assert split_sentences(
        "Dr. Smith paid 3.50 dollars at 5 p.m. on Friday. J. K. Rowling wrote it, e.g. here."
    ) == [
        "Dr. Smith paid 3.50 dollars at 5 p.m. on Friday.",
        "J. K. Rowling wrote it, e.g. here.",
    ]


def test_newlines_end_sentences_and_blank_lines_vanish():
    assert split_sentences("First line without a stop\n\n\nSecond   line\twith  spaces\n") == [
        "First line without a stop",
        "Second line with spaces",
    ]


def test_tiny_fragments_merge_with_a_neighbour():
    assert split_sentences("Hi. Ok. This is a longer sentence here. No.") == [
        "Hi. Ok. This is a longer sentence here. No."
    ]
    assert split_sentences("Hi. Ok. This is a longer sentence here. No.", min_chars=1) == [
        "Hi.",
        "Ok.",
        "This is a longer sentence here.",
        "No.",
    ]


def test_long_sentence_is_cut_at_clause_marks():
    text = "When the rain stopped, the children ran outside, the dogs followed them, and the sun came out."
    pieces = split_sentences(text, max_chars=40)
    assert pieces == [
        "When the rain stopped,",
        "the children ran outside,",
        "the dogs followed them,",
        "and the sun came out.",
    ]


def test_clauses_are_packed_up_to_the_limit():
    assert split_sentences("One, two, three, four, five, six.", max_chars=15) == [
        "One, two,",
        "three, four,",
        "five, six.",
    ]


def test_long_chinese_sentence_is_cut_at_chinese_clause_marks():
    text = "我们今天早上去了公园，看到了很多花、很多树和很多鸟：大家都很开心，一直玩到了晚上才回家。"
    pieces = split_sentences(text, max_chars=20)
    assert pieces == [
        "我们今天早上去了公园，看到了很多花、",
        "很多树和很多鸟：大家都很开心，",
        "一直玩到了晚上才回家。",
    ]


def test_long_clause_without_marks_is_cut_at_whitespace():
    text = "the cat sat on the mat and looked at the big red dog that sat by the door all day long"
    pieces = split_sentences(text, max_chars=25)
    assert all(len(p) <= 25 for p in pieces)
    assert " ".join(pieces) == text
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in pieces)


def test_unbroken_text_is_cut_hard_at_the_limit():
    pieces = split_sentences("字" * 45, max_chars=20)
    assert pieces == ["字" * 20, "字" * 20, "字" * 5]


@pytest.mark.parametrize("max_chars", [5, 12, 40, 200])
def test_no_piece_exceeds_the_limit_and_nothing_is_lost(max_chars):
    text = (
        "Polyvox speaks long texts, sentence by sentence; it never drops words! "
        "长句子会在逗号、顿号或冒号处切开：这样每一段都不会太长。\n"
        "Supercalifragilisticexpialidocious is a very long word indeed… isn't it?"
    )
    pieces = split_sentences(text, max_chars=max_chars)
    assert all(0 < len(p) <= max_chars for p in pieces)
    assert non_space("".join(pieces)) == non_space(text)


def test_empty_text_has_no_pieces():
    assert split_sentences("") == []
    assert split_sentences("  \n \t ") == []


def test_limit_must_be_positive():
    with pytest.raises(ValueError):
        split_sentences("Hello.", max_chars=0)
