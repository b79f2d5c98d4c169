"""Script detection: which writing systems a text's letters belong to."""

from __future__ import annotations

import pytest

from polyvox.text.script import Script, detect_scripts, foreign_letters


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "Café naïve façade, Straße, Ångström",
        "Call 555-0123 at 9:30 🎉 — ok?",
        "ｆｕｌｌｗｉｄｔｈ",
    ],
)
def test_latin_text(text):
    assert detect_scripts(text) == {Script.LATIN}


@pytest.mark.parametrize("text", ["你好世界", "こんにちは", "カタカナ", "안녕하세요", "日々"])
def test_chinese_japanese_and_korean_are_cjk(text):
    assert detect_scripts(text) == {Script.CJK}


@pytest.mark.parametrize("text", ["Привет", "Γειά σου", "مرحبا", "שלום", "नमस्ते", "สวัสดี"])
def test_other_scripts(text):
    assert detect_scripts(text) == {Script.OTHER}


def test_mixed_text_reports_every_script():
    assert detect_scripts("Hello 你好 Привет") == {Script.LATIN, Script.CJK, Script.OTHER}


def test_text_without_letters_has_no_script():
    assert detect_scripts("123 ... !? 。，！ 🎉") == frozenset()


def test_foreign_letters_lists_each_non_latin_letter_once_in_order():
    assert foreign_letters("Hello 你好, 你 world, да") == "你好да"
    assert foreign_letters("plain English") == ""


@pytest.mark.parametrize("text", ["The value of π is about 3.14", "α-helix and β-sheet", "5 µs, 3 ℓ, 10 Ω"])
def test_letters_used_as_symbols_do_not_make_english_foreign(text):
    assert detect_scripts(text) == {Script.LATIN}


def test_greek_words_are_not_symbols():
    assert detect_scripts("Say καλημέρα") == {Script.LATIN, Script.OTHER}
