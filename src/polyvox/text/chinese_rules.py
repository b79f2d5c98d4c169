"""Fixes in front of wetext's Chinese grammar for written forms it reads wrong.

Read as the grammar would not: "¥1,299" (the grouping comma read as a pause between two amounts),
"2.0.3版本" (a version number read as "二.零点三"), "50%-60%", "5-10%", "第3-5章" and "1-2倍" (the
dash read as a minus sign), "编号#123" (the "#" left in), "GPT-4" (the hyphen read as a minus sign),
"7×24小时" (the 24 read digit by digit; "×", "*" and "x" between digits are read "乘"), "6·18"
(a day named by its date, read digit by digit: 六一八).

"二" and "两" as a person says them: "第2名", "3月2日" ("二", where the grammar says "两"); "下午2点",
"2倍", "2年", "约2小时" ("两", where it says "二").

Clock or score: "凌晨0:30" has no clock reading in the grammar; hour 0 is read as a time,
"零点三十分", unless the text says it is a score. A score is an "a:b" after 比分 (or 战成, 打成...)
or before 战胜, 获胜, 落败 and the like, and is read "三比三十", never as a time ("比分3:30").

Digit by digit, 1 as "幺" as the grammar reads longer numbers: a seven-digit local phone number after
a word that names one ("电话555-1234"), a postcode after 邮编 ("邮编100081"), and an ID, account,
order or verification number after the word that names it ("身份证号1101...", "验证码123456").
Everything else is the grammar's own reading.
"""

from __future__ import annotations

import re

_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_VERSION = re.compile(r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d.])")
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_PERCENT_RANGE = re.compile(r"%\s?[-–~～]\s?(?=\d)")
_RANGE_BEFORE_PERCENT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?[-–~～]\s?(?=\d+(?:\.\d+)?\s?%)")
_ORDINAL_RANGE = re.compile(r"第(\d+)\s?[-–~～]\s?(?=\d)")
_NUMBER_SIGN = re.compile(r"#\s?(?=\d)")
_LETTER_HYPHEN_DIGIT = re.compile(r"(?<=[A-Za-z])-(?=\d)")
_TIMES_SIGN = re.compile(r"(?<![\dA-Za-z.])(?!0[xX])(\d+(?:\.\d+)?)\s?[×*＊xX]\s?(?=\d)")
_DIGIT_CUE = r"[：:\s]*(?:是|为)?[：:\s]*"
_LOCAL_PHONE = re.compile(rf"(电话|号码|拨打|热线|致电|手机|传真)({_DIGIT_CUE})(\d{{3}}-\d{{4}})(?![\d-])")
_POSTCODE = re.compile(rf"(邮编|邮政编码|邮码)({_DIGIT_CUE})(\d{{6}})(?!\d)")
_ID_NUMBER = re.compile(
    rf"(身份证(?:号码|号)?|证件号(?:码)?|卡号|账号|帐号|QQ号?|微信号|订单号|运单号|快递单号|工号|学号|验证码)"
    rf"({_DIGIT_CUE})(\d{{4,}})(?!\d)"
)
_PHONE_DIGITS = str.maketrans("0123456789", "零幺二三四五六七八九")
# A day named by its date with a middle dot, read digit by digit: "6·18" 六一八, "3·15" 三一五.
_DOTTED_DAY = re.compile(r"(?<![\d.])(\d{1,2})[·•](\d{1,2})(?![\d.])")
_DAY_DIGITS = str.maketrans("0123456789", "零一二三四五六七八九")
_SCORE_BEFORE = r"(?:比分|比数|战成|打成|踢成|总比分)[：:\s]*(?:是|为|定格在|变为|变成|来到)?[：:\s]*"
_SCORE_AFTER = (
    r"(?:的?(?:总)?比分|战胜|击败|打败|负于|胜出|获胜|取胜|落败|告负|不敌|完胜|大胜|险胜|惨败|拿下)"
)
_SCORE_CUED = re.compile(rf"({_SCORE_BEFORE})(\d+):(\d+)(?![\d:])")
_SCORE_FOLLOWED = re.compile(rf"(?<![\d:.])(\d+):(\d+)(?=\s?{_SCORE_AFTER})")
_HOUR_ZERO = re.compile(r"(?<![\d:.])0:(?=[0-5]\d(?!\d))")
_ORDINAL_TWO = re.compile(r"第2(?![\d.])")
_DAY_TWO = re.compile(r"(?<=月)2(?=[日号])")
_HOUR_TWO = re.compile(r"(?<![\d.:])2(?=点(?![\d零一二三四五六七八九]))")
# A count of two the grammar reads "二": "2倍", "2年", "2台", and anything after 约 ("约2小时").
_TWO_MEASURES = r"(?:倍|年(?!级|代|\d+班)|次(?!方)|台|种|份|公斤|英里|毛|成(?!绩))"
_COUNT_TWO = re.compile(
    rf"(?<![\d.:/\-–~～])2(?=(?:[-–~～到至]\d+(?:\.\d+)?)?{_TWO_MEASURES})"
    r"|(?<=约)2(?=[个位名人天年周小分秒公千万亿米斤克吨倍次台种份件条张本只头匹辆家所间])"
)
# A range before a measure word the grammar reads as a subtraction: "1-2倍", "2-3年", "2-3次".
_MEASURE_RANGE = re.compile(
    r"(?<![\d.:/\-–~～])(\d{1,4}(?:\.\d+)?)\s?[-–~～]\s?(?=\d{1,4}(?:\.\d+)?(?:倍|年(?!级|代)|次))"
)


def prepare_chinese(run: str) -> str:
    """`run` with the forms above rewritten so that the Chinese grammar reads them right."""
    run = _LOCAL_PHONE.sub(_read_digits, run)
    run = _POSTCODE.sub(_read_digits, run)
    run = _ID_NUMBER.sub(_read_digits, run)
    run = _DOTTED_DAY.sub(lambda m: (m[1] + m[2]).translate(_DAY_DIGITS), run)
    run = _THOUSANDS_COMMA.sub("", run)
    run = _VERSION.sub(_version, run)
    run = _SCORE_CUED.sub(lambda m: f"{m[1]}{m[2]}比{m[3]}", run)
    run = _SCORE_FOLLOWED.sub(lambda m: f"{m[1]}比{m[2]}", run)
    run = _HOUR_ZERO.sub("00:", run)
    run = _PERCENT_RANGE.sub("%到", run)
    run = _RANGE_BEFORE_PERCENT.sub(r"\1%到", run)
    run = _ORDINAL_RANGE.sub(r"第\1到", run)
    run = _MEASURE_RANGE.sub(r"\1到", run)
    run = _TIMES_SIGN.sub(r"\1乘", run)
    run = _ORDINAL_TWO.sub("第二", run)
    run = _DAY_TWO.sub("二", run)
    run = _HOUR_TWO.sub("两", run)
    run = _COUNT_TWO.sub("两", run)
    run = _NUMBER_SIGN.sub("", run)
    return _LETTER_HYPHEN_DIGIT.sub(" ", run)


def _read_digits(match: re.Match[str]) -> str:
    """The cue word, what follows it, and the number digit by digit ("555-1234" → "五五五幺二三四")."""
    return match[1] + match[2] + match[3].replace("-", "").translate(_PHONE_DIGITS)


def _version(match: re.Match[str]) -> str:
    if _IP.fullmatch(match.group()):
        return match.group()  # the grammar reads an IP address right: "一九二点一六八点一点一"
    return match.group().replace(".", "点")
