"""The text front end: lexicon, normalisation switch, piece limits, parentheses read rather than obeyed."""

from __future__ import annotations

import re

import pytest

from polyvox.text.frontend import TextFrontend, neutralize_leading_parenthesis
from polyvox.text.lexicon import Lexicon, LexiconEntry

pytest.importorskip("wetext")

OPENERS = "(（﹙⁽₍"

ENGLISH = [
    "The committee met early in the morning to discuss the budget for the coming year.",
    "Nobody expected the discussion to last until the evening, but it did.",
    "After a short break, the chair asked everyone to summarise their position in one sentence",
    "What followed was a long silence; then somebody laughed.",
]
CHINESE = [
    "委员会一大早就开会讨论来年的预算。",
    "谁也没想到讨论会一直持续到晚上，但事实就是如此。",
    "休息片刻之后，主席请每个人用一句话概括自己的立场，然后大家陷入了长久的沉默",
    "接着有人笑了起来！",
]


def spoken_units(text: str) -> list[str]:
    """Latin words and CJK characters in order: what must survive splitting."""
    return re.findall(r"[A-Za-z]+|[\u4e00-\u9fff]", text)


def mixed_text(length: int) -> str:
    sentences, i = [], 0
    while sum(len(s) + 1 for s in sentences) < length:
        sentences.append((ENGLISH if i % 3 else CHINESE)[i % 4])
        i += 1
    return " ".join(sentences)[:length]


def test_a_long_mixed_input_is_split_within_the_limit_and_nothing_is_lost():
    text = mixed_text(4000)
    frontend = TextFrontend(max_piece_chars=120)
    pieces = frontend.prepare(text)
    assert len(pieces) > 4000 // 120
    assert all(0 < len(piece) <= 120 for piece in pieces)
    assert spoken_units(" ".join(pieces)) == spoken_units(text)


def test_a_long_input_with_numbers_is_spelt_out_within_the_limit():
    text = ("On 2024-03-05 we sold 1,250 units for $5.50 each. 2024年3月5日，我们卖出了25台。" * 45)[:4000]
    pieces = TextFrontend(max_piece_chars=150).prepare(text)
    assert all(len(piece) <= 150 for piece in pieces)
    joined = " ".join(pieces)
    assert not re.search(r"\d", joined)
    assert joined.count("二十五台") == text.count("25台")
    assert joined.count("dollars and fifty cents") == text.count("$5.50")


def test_normalisation_is_on_by_default_and_switchable_per_request():
    frontend = TextFrontend()
    assert frontend.prepare("I have 3 apples.") == ["I have three apples."]
    assert frontend.prepare("I have 3 apples.", normalize=False) == ["I have 3 apples."]
    off_by_default = TextFrontend(normalize_default=False)
    assert off_by_default.prepare("I have 3 apples.") == ["I have 3 apples."]
    assert off_by_default.prepare("I have 3 apples.", normalize=True) == ["I have three apples."]


def test_normalize_false_leaves_every_battery_sentence_as_written():
    from .reading_en import CASES
    from .reading_zh import FIXED, KEPT

    texts = [text for cases in CASES.values() for text, _ in cases] + [text for text, _ in KEPT + FIXED]
    frontend = TextFrontend()
    assert [text for text in texts if " ".join(frontend.prepare(text, normalize=False)) != text] == []
    assert frontend.prepare("1984 was a good year.") != ["1984 was a good year."]


def test_chinese_and_latin_runs_are_spaced_when_normalising():
    assert TextFrontend().prepare("我用GPU跑模型。") == ["我用 GPU 跑模型。"]
    assert TextFrontend().prepare("我用GPU跑模型。", normalize=False) == ["我用GPU跑模型。"]


def test_a_parenthesised_input_is_read_not_obeyed():
    for text in ("(whispering) Come closer, please.", "（轻声细语）请靠近一点。", "\u200b ((sad)) I lost."):
        pieces = TextFrontend().prepare(text)
        assert pieces[0][0] not in OPENERS
        assert spoken_units(" ".join(pieces)) == spoken_units(text)


def test_no_piece_starts_with_a_parenthesis_even_after_splitting():
    text = "First sentence here. (laughs) Second sentence here. （笑）第三句话在这里。"
    pieces = TextFrontend(max_piece_chars=30, min_piece_chars=1).prepare(text)
    assert len(pieces) == 3
    assert all(piece[0] not in OPENERS for piece in pieces)
    assert spoken_units(" ".join(pieces)) == spoken_units(text)


def test_neutralising_keeps_the_words_and_marks_the_aside_with_a_comma():
    assert neutralize_leading_parenthesis("(whispering) hello") == "whispering, hello"
    assert neutralize_leading_parenthesis("（笑）你好") == "笑，你好"
    assert neutralize_leading_parenthesis("(unclosed hello") == "unclosed hello"
    assert neutralize_leading_parenthesis("(a)(b) c")[0] not in OPENERS
    assert neutralize_leading_parenthesis("hello (aside) there") == "hello (aside) there"


def test_lexicon_is_applied_before_normalisation():
    lexicon = Lexicon([LexiconEntry("COVID-19", "covid nineteen"), LexiconEntry("Nguyen", "win")])
    pieces = TextFrontend(lexicon).prepare("Nguyen had COVID-19 in 2020.")
    assert pieces == ["win had covid nineteen in twenty twenty."]


def test_the_lexicon_wins_over_the_number_rules():
    lexicon = Lexicon([LexiconEntry("1984", "Nineteen Eighty-Four"), LexiconEntry("7×24", "全天候")])
    frontend = TextFrontend(lexicon)
    assert frontend.prepare("1984 people read it.") == ["Nineteen Eighty-Four people read it."]
    assert frontend.prepare("提供7×24服务。") == ["提供全天候服务。"]


def test_lexicon_edits_take_effect_on_the_next_request():
    lexicon = Lexicon()
    frontend = TextFrontend(lexicon)
    assert frontend.prepare("Siobhan says hi.") == ["Siobhan says hi."]
    lexicon.add("Siobhan", "shiv-awn")
    assert frontend.prepare("Siobhan says hi.") == ["shiv-awn says hi."]


def test_pieces_with_nothing_to_say_are_dropped():
    assert TextFrontend().prepare("...\n!!!\n") == []
    assert TextFrontend(min_piece_chars=1).prepare("Hello.\n...\nBye.") == ["Hello.", "Bye."]
