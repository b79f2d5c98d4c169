"""Text normalisation for speech: numbers, dates, money and units written out as words, and a space
between Chinese and Latin runs.

Mixed text is normalised run by run: a stretch without Chinese characters that holds at least two
whitespace-separated Latin words ("Apple sold 200 million iPhones"), or one in a line with at least
as many Latin words as Chinese characters ("I paid $5 for 北京烤鸭 in 2024"), is English, everything else
(Chinese, and short Latin bits inside Chinese such as "3.5kg", "120km/h" or "iPhone 15") Chinese,
which reads numbers the Chinese way and leaves Latin words alone; a number written against a
Chinese character ("200万") goes with the Chinese side. A line with no Chinese character is English
unless it holds only digits, signs and Chinese punctuation ("1/2。"). English runs are read by
`polyvox.text.english_rules` (money, dates, times, phone numbers...) and then by WeTextProcessing's
`wetext` English grammar (abbreviations such as "Dr.", "&"); Chinese runs by `wetext`'s Chinese
grammar after the few fixes in `polyvox.text.chinese_rules`. Korean is left as it is (there is no
Korean grammar, and Chinese numerals would be wrong in it). Text is fed to `wetext` a sentence at a
time because its cost grows faster than linearly with length. Without the `text` extra (`wetext`,
`num2words`) only the spacing is applied.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Literal

from polyvox.text.chinese_rules import prepare_chinese
from polyvox.text.split import clause_ends, sentence_ends

Lang = Literal["zh", "en"]

log = logging.getLogger(__name__)

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
# Runs free of CJK letters and of full-width CJK punctuation (the Chinese side keeps those).
_NON_CJK_RUN = re.compile(f"[^{_CJK}\u3000-\u303f\uff00-\uffef]+")
_CJK_PUNCTUATION = re.compile("[\u3000-\u303f\uff00-\uffef]")
_LATIN_LETTER = re.compile("[A-Za-z]")
_TRAILING_NUMBER = re.compile(r"[-+]?\d[\d,.]*$")
_HAN_KANA = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Korean has spaces of its own
_CJK_THEN_LATIN = re.compile(f"([{_HAN_KANA}])(?=[A-Za-z0-9])")
_LATIN_THEN_CJK = re.compile(f"([A-Za-z0-9])(?=[{_HAN_KANA}])")
_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_LONG_SENTENCE = 300
_ESCAPED = re.compile(r"\\([\"\\])")
_FULL_WIDTH_ALNUM = {
    code: code - 0xFEE0 for code in (*range(0xFF10, 0xFF1A), *range(0xFF21, 0xFF3B), *range(0xFF41, 0xFF5B))
}

_lock = threading.Lock()
_normalizers: dict[str, object] = {}
_call_locks = {"zh": threading.Lock(), "en": threading.Lock()}
_unavailable = False
_no_english_rules = False


def normalize_text(text: str, lang: Lang | None = None) -> str:
    """`text` with numbers, dates, money and units spelt out, and Chinese/Latin runs spaced apart.

    `lang` forces one grammar for the whole text; None picks it per run from the script. Line breaks
    are kept; other whitespace runs collapse to one space.
    """
    parts = _LINE_BREAK.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _normalize_line(parts[i], lang)
    return "".join(parts)


def space_cjk_latin(text: str) -> str:
    """A space between a Chinese/Japanese character and a Latin letter or digit: "用GPU跑" → "用 GPU 跑"."""
    return _LATIN_THEN_CJK.sub(r"\1 ", _CJK_THEN_LATIN.sub(r"\1 ", text))


def language_runs(line: str) -> list[tuple[Lang, str]]:
    """Cut one line into consecutive (language, text) runs for the two grammars; see the module doc."""
    if not _CJK_CHAR.search(line):
        chinese = _CJK_PUNCTUATION.search(line) and not _LATIN_LETTER.search(line)
        return [("zh" if chinese else "en", line)]
    runs: list[tuple[Lang, str]] = []
    start = 0
    # In a mostly English line one Latin word makes a run English ("for 北京烤鸭 in 2024"), else two.
    needed = 1 if _latin_words(line) >= len(_CJK_CHAR.findall(line)) else 2
    for match in _NON_CJK_RUN.finditer(line):
        if _latin_words(match.group()) >= needed:
            end = match.end()
            if end < len(line) and _CJK_CHAR.match(line, end):  # "sold 200万": the number is Chinese
                trailing = _TRAILING_NUMBER.search(match.group())
                end -= len(trailing.group()) if trailing else 0
            _append_run(runs, "zh", line[start : match.start()])
            _append_run(runs, "en", line[match.start() : end])
            start = end
    _append_run(runs, "zh", line[start:])
    return runs


def _latin_words(text: str) -> int:
    return sum(1 for token in text.split() if _LATIN_LETTER.search(token))


def _append_run(runs: list[tuple[Lang, str]], lang: Lang, text: str) -> None:
    if not text:
        return
    if runs and runs[-1][0] == lang:
        runs[-1] = (lang, runs[-1][1] + text)
    else:
        runs.append((lang, text))


def _normalize_line(line: str, lang: Lang | None) -> str:
    line = _SPACES.sub(" ", line.translate(_FULL_WIDTH_ALNUM)).strip()
    if not line:
        return line
    runs = [(lang, line)] if lang is not None else language_runs(line)
    out = []
    for run_lang, run in runs:
        edge_left = " " if run[:1].isspace() else ""
        edge_right = " " if run[-1:].isspace() else ""
        out.append(edge_left + _normalize_run(run.strip(), run_lang) + edge_right)
    return _SPACES.sub(" ", space_cjk_latin("".join(out))).strip()


def _normalize_run(run: str, lang: Lang) -> str:
    if not run:
        return run
    if lang == "en":
        run = _read_english(run)
    elif _HANGUL.search(run):
        return run  # Chinese numerals would be wrong in Korean, and there is no Korean grammar
    else:
        run = prepare_chinese(run)
    out = []
    for sentence, separator in grammar_pieces(run):
        out.append(_wetext(sentence, lang) + separator)
    return "".join(out)


def grammar_pieces(text: str) -> list[tuple[str, str]]:
    """The (sentence, following whitespace) pairs that go to the grammar one at a time: sentences as
    `polyvox.text.split` ends them, those past `_LONG_SENTENCE` cut at clauses too. Joined back they
    are `text`."""
    out = []
    for sentence, separator in _cut(text, sentence_ends(text)):
        if len(sentence) > _LONG_SENTENCE:
            clauses = _cut(sentence, clause_ends(sentence))
            clauses[-1] = (clauses[-1][0], clauses[-1][1] + separator)
            out.extend(clauses)
        else:
            out.append((sentence, separator))
    return out


def _cut(text: str, ends: list[int]) -> list[tuple[str, str]]:
    """`text` cut at the offsets `ends` into (piece, the whitespace after it) pairs."""
    pairs: list[tuple[str, str]] = []
    bounds = [0, *ends, len(text)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        piece = text[start:end]
        body = piece.strip()
        lead = piece[: len(piece) - len(piece.lstrip())]
        trail = piece[len(lead) + len(body) :]
        if pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + lead)
        elif lead:
            pairs.append(("", lead))
        if body:
            pairs.append((body, trail))
        elif pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + trail)
    return pairs


def _read_english(run: str) -> str:
    """`run` with its numbers read by the English rules; as it is without `num2words`."""
    global _no_english_rules
    try:
        from polyvox.text.english_rules import read_numbers
    except ImportError:
        if not _no_english_rules:
            _no_english_rules = True
            log.warning(
                "num2words is not installed (pip install 'polyvox[text]'): "
                "English numbers are read by wetext's grammar alone"
            )
        return run
    try:
        return read_numbers(run)
    except Exception:  # as with the grammars: reading a run unnormalised beats failing the request
        log.debug("the English rules could not read a run of %d characters", len(run), exc_info=True)
        return run


def _wetext(sentence: str, lang: Lang) -> str:
    normalizer = _normalizer(lang)
    if normalizer is None or not sentence.strip():
        return sentence
    try:
        with _call_locks[lang]:
            spoken = normalizer.normalize(sentence)
    except Exception:  # the grammars reject some inputs; reading them unnormalised beats failing
        log.debug("wetext could not normalise a sentence of %d characters", len(sentence), exc_info=True)
        return sentence
    return _ESCAPED.sub(r"\1", spoken)


def _normalizer(lang: Lang):
    """The `wetext` normaliser for `lang`, loaded once on first use; None without `wetext`."""
    global _unavailable
    normalizer = _normalizers.get(lang)
    if normalizer is not None or _unavailable:
        return normalizer
    with _lock:
        if lang not in _normalizers and not _unavailable:
            try:
                from wetext import Normalizer
            except ImportError:
                log.warning("wetext is not installed (pip install 'polyvox[text]'): numbers stay as digits")
                _unavailable = True
                return None
            _normalizers[lang] = Normalizer(lang=lang, operator="tn")
        return _normalizers.get(lang)
