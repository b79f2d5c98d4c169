"""Fixes in front of wetext's Chinese grammar for written forms it reads wrong.

"¥1,299" (the grouping comma read as a pause between two amounts), "2.0.3版本" (a version number
read as "二.零点三"), "50%-60%" (the dash read as a minus sign), "编号#123" (the "#" left in), "GPT-4"
(the hyphen read as a minus sign), "电话555-1234" (a seven-digit local number read as a subtraction:
after a word that names a phone number it is read digit by digit, 1 as "幺" as the grammar reads
longer numbers). Everything else is the grammar's own reading.
"""

from __future__ import annotations

import re

_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_VERSION = re.compile(r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d.])")
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_PERCENT_RANGE = re.compile(r"%\s?[-–~～]\s?(?=\d)")
_NUMBER_SIGN = re.compile(r"#\s?(?=\d)")
_LETTER_HYPHEN_DIGIT = re.compile(r"(?<=[A-Za-z])-(?=\d)")
_LOCAL_PHONE = re.compile(
    r"(电话|号码|拨打|热线|致电|手机|传真)([：:\s]*(?:是|为)?[：:\s]*)(\d{3}-\d{4})(?![\d-])"
)
_PHONE_DIGITS = str.maketrans("0123456789", "零幺二三四五六七八九")


def prepare_chinese(run: str) -> str:
    """`run` with the forms above rewritten so that the Chinese grammar reads them right."""
    run = _LOCAL_PHONE.sub(lambda m: m[1] + m[2] + m[3].replace("-", "").translate(_PHONE_DIGITS), run)
    run = _THOUSANDS_COMMA.sub("", run)
    run = _VERSION.sub(_version, run)
    run = _PERCENT_RANGE.sub("%到", run)
    run = _NUMBER_SIGN.sub("", run)
    return _LETTER_HYPHEN_DIGIT.sub(" ", run)


def _version(match: re.Match[str]) -> str:
    if _IP.fullmatch(match.group()):
        return match.group()  # the grammar reads an IP address right: "一九二点一六八点一点一"
    return match.group().replace(".", "点")
