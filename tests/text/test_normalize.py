"""Text normalisation: what a listener would hear spelt out, in English, Chinese and both mixed."""

from __future__ import annotations

import re
import sys
import threading

import pytest

from polyvox.text.normalize import language_runs, normalize_text, space_cjk_latin

pytest.importorskip("wetext")

CHINESE_NUMERALS = set("零一二三四五六七八九十百千万亿两点负")


def has_digit(text: str) -> bool:
    return re.search(r"\d", text) is not None


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def test_english_numbers_and_money_become_words():
    spoken = normalize_text("I have 3 apples and $5.50")
    assert not has_digit(spoken)
    assert "$" not in spoken
    assert words(spoken)[:4] == ["i", "have", "three", "apples"]
    assert {"five", "dollars", "fifty", "cents"} <= set(words(spoken))


def test_thousands_are_read_with_their_leading_digit():
    spoken = normalize_text("There were 1,234 people")
    assert not has_digit(spoken)
    assert "one thousand" in spoken or "twelve" in spoken


def test_english_dates_times_percent_units():
    spoken = normalize_text("On Mar 5, 2024 at 5:30 pm, 25% of us walked 10 km.")
    assert not has_digit(spoken)
    assert {"march", "fifth", "twenty", "four", "five", "thirty", "percent", "kilometers"} <= set(
        words(spoken)
    )


def test_chinese_date_is_read_in_chinese_numerals():
    spoken = normalize_text("2024年3月5日")
    assert not has_digit(spoken)
    assert set(spoken) <= CHINESE_NUMERALS | set("年月日")
    assert "三月" in spoken and spoken.endswith("五日")


def test_chinese_counts_money_and_units():
    spoken = normalize_text("共有25个，重量3.5kg，价格是$5，温度-5°C")
    assert not has_digit(spoken)
    assert "二十五个" in spoken
    assert "三点五千克" in spoken
    assert "美元" in spoken
    assert "负五" in spoken


def test_mixed_text_reads_english_runs_in_english_and_chinese_in_chinese():
    spoken = normalize_text("在2024年, Apple sold 200 million iPhones.")
    assert not has_digit(spoken)
    assert "二零二四年" in spoken
    assert "two hundred million iPhones" in spoken


def test_latin_bits_inside_chinese_stay_with_the_chinese_reading():
    assert language_runs("重量3.5kg的苹果") == [("zh", "重量3.5kg的苹果")]
    runs = language_runs("我买了3 apples and 2 oranges。好的")
    assert [lang for lang, _ in runs] == ["zh", "en", "zh"]
    assert "".join(text for _, text in runs) == "我买了3 apples and 2 oranges。好的"


def test_a_hyphen_after_a_name_is_not_a_minus_sign():
    spoken = normalize_text("GPT-4很强")
    assert "负" not in spoken
    assert "GPT" in spoken and "四" in spoken


def test_forced_language_uses_that_grammar():
    assert "twenty five" in normalize_text("25", lang="en")
    assert "二十五" in normalize_text("25", lang="zh")


def test_cjk_and_latin_runs_are_spaced_apart():
    assert space_cjk_latin("我用GPU跑VoxCPM2模型") == "我用 GPU 跑 VoxCPM2 模型"
    assert space_cjk_latin("已经有空格 GPU 了，好。") == "已经有空格 GPU 了，好。"
    spoken = normalize_text("我有3个iPhone和MacBook")
    assert "个 iPhone 和 MacBook" in spoken


def test_quotes_are_not_escaped_and_line_breaks_survive():
    spoken = normalize_text('He said "hi 5" to me.\n\n他说“你好”。')
    assert spoken.splitlines() == ['He said "hi five" to me.', "", "他说“你好”。"]
    assert "\\" not in spoken


def test_korean_is_not_given_chinese_numerals():
    assert normalize_text("사과 3개") == "사과 3개"


def test_text_without_anything_to_normalise_is_unchanged():
    for text in ("Hello, world!", "你好，世界。", "Good morning, Dr. Smith."[:13]):
        assert normalize_text(text) == text


def test_grammar_failures_fall_back_to_the_original_words():
    spoken = normalize_text("x   y 3 ok")
    assert words(spoken) == ["x", "y", "three", "ok"]


def test_normalisers_are_safe_to_share_between_threads():
    texts = ["I have 3 apples.", "共有25个。", "在2024年, Apple sold 200 million iPhones."]
    expected = [normalize_text(text) for text in texts]
    results: list[list[str]] = []

    def worker():
        results.append([normalize_text(text) for text in texts * 3])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected * 3] * 4


def test_a_unit_written_inside_chinese_stays_with_the_chinese_reading():
    assert language_runs("速度120km/h。") == [("zh", "速度120km/h。")]
    assert normalize_text("速度120km/h。") == "速度每小时一百二十公里。"


def test_a_number_written_against_a_chinese_character_is_read_in_chinese():
    runs = language_runs("Apple sold 200万 iPhones.")
    assert runs[0] == ("en", "Apple sold ")
    assert runs[1][0] == "zh" and runs[1][1].startswith("200万")
    assert "two hundred" not in normalize_text("Apple sold 200万 iPhones.")


def test_a_mostly_english_line_reads_its_short_english_bits_in_english():
    spoken = normalize_text("I paid $5 for 北京烤鸭 in 2024.")
    assert spoken == "I paid five dollars for 北京烤鸭 in twenty twenty four."


def test_digits_with_chinese_punctuation_only_are_chinese():
    assert normalize_text("1/2。") == "二分之一。"
    assert normalize_text("1/2.") == "one half."


def test_without_num2words_english_numbers_still_reach_the_grammar(monkeypatch, caplog):
    import polyvox.text.normalize as normalize

    for name in ("polyvox.text.english_rules", "polyvox.text.english_words"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "num2words", None)
    monkeypatch.setattr(normalize, "_no_english_rules", False)
    with caplog.at_level("WARNING"):
        assert normalize_text("I have 3 apples.") == "I have three apples."
    assert "num2words is not installed" in caplog.text


def test_numbers_past_the_quadrillions_are_read_digit_by_digit_and_never_fail():
    huge = "1" + ",000" * 200
    assert (
        normalize_text(f"We owe {huge} dollars.")
        == "We owe " + " ".join(["one"] + ["zero"] * 600) + " dollars."
    )
    assert normalize_text("It is " + "9" * 20 + ".5 m.").startswith("It is nine nine nine")
    assert normalize_text("1,000,000,000,000,000 people") == "one quadrillion people"


def test_a_time_zone_after_a_time_is_not_a_new_sentence():
    assert normalize_text("The game starts at 8:15 p.m. EST.") == "The game starts at eight fifteen PM EST."
    assert normalize_text("It ends at 5 p.m. Bring snacks.") == "It ends at five PM. Bring snacks."


@pytest.mark.parametrize("number", ["0", "2", "10", "0.5", "4.5", "100", "1984", "2000", "0730", "1,234"])
def test_the_rules_read_every_battery_form_with_other_numbers_in_it(number):
    """A rule that raises leaves its whole run unread; no battery form may do that with other numbers."""
    pytest.importorskip("num2words")
    from polyvox.text.chinese_rules import prepare_chinese
    from polyvox.text.english_rules import read_numbers

    from .reading_en import CASES
    from .reading_zh import FIXED, KEPT

    for text in [text for cases in CASES.values() for text, _ in cases]:
        read_numbers(re.sub(r"\d+(?:\.\d+)?", number, text))
    for text, _ in KEPT + FIXED:
        prepare_chinese(re.sub(r"\d+(?:\.\d+)?", number, text))
