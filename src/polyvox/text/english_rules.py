"""English readings of what is written with digits: money, dates, times, phone numbers and the rest.

`read_numbers` rewrites a run of English text so that no digit is left where a rule knows how a
person reads it: "$1,234.56" → "one thousand two hundred and thirty four dollars and fifty six
cents", "the 1990s" → "the nineteen nineties", "555-1234" → "five five five, one two three four".
The rules run in order, most specific first (a phone number before a range, a date before a
fraction), and each writes words only, so a later rule never reads an earlier one's output. What is
left (abbreviations such as "Dr.", "&") goes on to wetext's English grammar. Whether the words
around a number make it a year ("1984 was a good year") or an amount that qualifies the noun after
it ("a $5 bill") is `polyvox.text.english_context`'s to say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from polyvox.text import english_tables as tables
from polyvox.text.english_context import CLAUSE_START, YEAR_NOUNS, YEAR_VERBS, qualifies_next_noun
from polyvox.text.english_words import (
    cardinal,
    decimal,
    digits_one_by_one,
    fraction,
    is_one,
    ordinal,
    year,
)

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
_AMOUNT = rf"(?:{_NUM}(?:\.\d+)?|\.\d+)"
_START = r"(?<![\w.,])"  # a number that does not continue a word, a decimal or a grouped number
_END = r"(?![\w]|[.,]\d)"
_DASH = r"\s?[-–—~]\s?"
_SIGNS = {"-": "minus", "−": "minus", "+": "plus", "±": "plus or minus"}
_SIGN = r"([-−+±]?)"
_PERIODS = {"mo": "month", "yr": "year", "hr": "hour"}
_YEAR = r"(?:1\d{3}|20\d{2})"
_MERIDIEM = r"[AaPp]\.?[Mm]\b\.?"
_TIME_ZONE = r"(?:[ECMP][SD]?T|GMT|UTC|BST|CET|CEST|IST|JST|AEST|AEDT)\b"


def read_numbers(text: str) -> str:
    """`text` with every written number a rule covers read out in English words (see module doc)."""
    for pattern, reader in _RULES:
        text = pattern.sub(reader, text)
    return text


def _sign(written: str) -> str:
    return _SIGNS[written] + " " if written else ""


def _amount_range(low: str, high: str | None) -> str:
    return decimal(low) if high is None else f"{decimal(low)} to {decimal(high)}"


def _phone(match: re.Match[str]) -> str:
    groups = re.findall(r"\d+", match.group())
    spoken = ", ".join(digits_one_by_one(group) for group in groups)
    return ("plus " if match.group().startswith("+") else "") + spoken


def _national_phone(match: re.Match[str]) -> str:
    """ "020 7946 0958", "0800 123 4567": a number dialled inside one country (9 to 13 digits)."""
    if not 9 <= sum(c.isdigit() for c in match.group()) <= 13:
        return match.group()
    return _phone(match)


def _ip(match: re.Match[str]) -> str:
    return " dot ".join(digits_one_by_one(part) for part in match.group().split("."))


def _version(match: re.Match[str]) -> str:
    spoken = " point ".join(cardinal(part) for part in match.group(2).split("."))
    return ("version " if match.group(1) else "") + spoken


def _date(month: int, day: int, year_digits: str | None) -> str:
    spoken = f"{tables.MONTHS[month - 1]} {ordinal(str(day))}"
    return f"{spoken}, {_year_words(year_digits)}" if year_digits else spoken


def _year_words(digits: str) -> str:
    if len(digits) == 2:  # "'24", "12/25/23"
        return cardinal(digits) if digits[0] != "0" else "oh " + cardinal(digits[1])
    return year(digits)


def _iso_date(match: re.Match[str]) -> str:
    year_digits, month, day = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return match.group()
    return _date(int(month), int(day), year_digits)


def _slash_date(match: re.Match[str]) -> str:
    first, second, year_digits = (int(match.group(1)), int(match.group(2)), match.group(3))
    if first <= 12 and second <= 31:  # month first, as in the US; a first field past 12 is a day
        return _date(first, second, year_digits)
    if second <= 12 and first <= 31:
        return _date(second, first, year_digits)
    return match.group()


def _month_day(match: re.Match[str]) -> str:
    month, day, year_digits = match.groups()
    if not 1 <= int(day) <= 31:
        return match.group()
    return _date(tables.MONTHS.index(tables.month_name(month)) + 1, int(day), year_digits)


def _day_month(match: re.Match[str]) -> str:
    day, month, year_digits = match.groups()
    if not 1 <= int(day) <= 31:
        return match.group()
    after_the = match.string[: match.start()].rstrip().lower().endswith("the")
    spoken = f"{'' if after_the else 'the '}{ordinal(day)} of {tables.month_name(month)}"
    return f"{spoken} {year(year_digits)}" if year_digits else spoken


def _plural(words: str) -> str:
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}".strip()


def _clock(hour: int, minutes: str) -> str:
    if minutes == "00":
        return cardinal(str(hour))
    return f"{cardinal(str(hour))} {'oh ' if minutes[0] == '0' else ''}{cardinal(minutes.lstrip('0') or '0')}"


def _time_of_day(match: re.Match[str]) -> str:
    hour, minutes, letter, dotted = match.groups()
    if not 1 <= int(hour) <= 12 or (minutes and int(minutes) > 59):
        return match.group()
    spoken = f"{_clock(int(hour), minutes or '00')} {letter.upper()}M"
    rest = match.string[match.end() :].lstrip()
    zone = re.match(_TIME_ZONE, rest)  # "8:15 p.m. EST": the zone belongs to the time
    ends_sentence = dotted.startswith(".") and (not rest or (rest[0].isupper() and not zone))
    return spoken + ("." if ends_sentence else "")


def _clock_time(match: re.Match[str]) -> str:
    hour, minutes, seconds = int(match.group(1)), match.group(2), match.group(3)
    if hour > 24 or int(minutes) > 59 or (seconds and int(seconds) > 59):
        return match.group()
    if seconds:  # a duration: "1:30:15"
        hours = f"{cardinal(str(hour))} {'hour' if hour == 1 else 'hours'}"
        return f"{hours} {cardinal(minutes)} minutes and {cardinal(seconds)} seconds"
    if minutes == "00":
        return f"{cardinal(str(hour))} o'clock" if 1 <= hour <= 12 else f"{cardinal(str(hour))} hundred"
    return _clock(hour, minutes)


def _military_time(match: re.Match[str]) -> str:
    hour, minutes = (match[1], match[2]) if match[1] else (match[3], match[4])
    spoken = f"{'oh ' if hour[0] == '0' else ''}{cardinal(str(int(hour)))}"
    return f"{spoken} {'hundred' if minutes == '00' else _clock(0, minutes).removeprefix('zero ')}"


def _paired(digits: str) -> str:
    """A flight or house number as people say it: "901" → "nine oh one", "1600" → "sixteen hundred"."""
    return year(digits) if len(digits) <= 4 else digits_one_by_one(digits)


def _money_words(amount: str, currency: tables.Currency) -> str:
    whole, _, fraction_digits = amount.replace(",", "").partition(".")
    if len(fraction_digits) > 2 or (fraction_digits and currency.cent is None):
        return f"{decimal(amount)} {currency.many}"
    cents = int(fraction_digits.ljust(2, "0")) if fraction_digits else 0
    whole_words = f"{cardinal(whole or '0')} {currency.one if whole == '1' else currency.many}"
    if not cents:
        return whole_words
    cent_words = f"{cardinal(str(cents))} {currency.cent if cents == 1 else currency.cents}"
    return cent_words if int(whole or "0") == 0 else f"{whole_words} and {cent_words}"


def _prefix_money(match: re.Match[str]) -> str:
    sign, symbol, low, high, magnitude, letter = match.groups()
    currency = tables.PREFIX_CURRENCIES[symbol]
    scale = magnitude or letter
    name = _currency_name(match, currency, low, high)
    if scale:
        return f"{_sign(sign)}{_amount_range(low, high)} {tables.MAGNITUDES[scale]} {name}"
    if high is not None or name == currency.one:
        return f"{_sign(sign)}{_amount_range(low, high)} {name}"
    if len(low.partition(".")[2]) == 2 and currency.cent and qualifies_next_noun(match):
        return _sign(sign) + _qualifying_money(low.replace(",", ""), currency)
    return _sign(sign) + _money_words(low, currency)


def _qualifying_money(amount: str, currency: tables.Currency) -> str:
    """An amount with cents before the noun it qualifies: "a $5.50 fee" → "a five fifty fee"."""
    whole, _, cents = amount.partition(".")
    if cents == "00":
        return f"{cardinal(whole or '0')} {currency.one}"
    if not whole.strip("0"):
        return f"{cardinal(cents.lstrip('0'))} {currency.cent}"
    return f"{cardinal(whole)} {_clock(0, cents).removeprefix('zero ')}"


def _currency_name(match: re.Match[str], currency: tables.Currency, low: str, high: str | None) -> str:
    """The currency's name in the plural, or in the singular where the amount qualifies a noun ("a $5
    bill") and has no cents to read."""
    if "." not in low and (high is None or "." not in high) and qualifies_next_noun(match):
        return currency.one
    return currency.many


def _suffix_money(match: re.Match[str]) -> str:
    sign, low, high, symbol = match.groups()
    if symbol == "¢":
        return f"{_sign(sign)}{_amount_range(low, high)} {'cent' if is_one(low) and not high else 'cents'}"
    currency = tables.SUFFIX_CURRENCIES[symbol]
    name = _currency_name(match, currency, low, high)
    if high is not None or name == currency.one:
        return f"{_sign(sign)}{_amount_range(low, high)} {name}"
    return _sign(sign) + _money_words(low, currency)


def _percent(match: re.Match[str]) -> str:
    sign, low, high = match.groups()
    return f"{_sign(sign)}{_amount_range(low, high)} percent"


def _unit(match: re.Match[str]) -> str:
    sign, low, high, unit = match.groups()
    one, many = tables.UNITS[unit]
    singular = (is_one(low) and high is None) or qualifies_next_noun(match)  # "a 10 kg bag"
    return f"{_sign(sign)}{_amount_range(low, high)} {one if singular else many}"


def _fraction_of_unit(match: re.Match[str]) -> str:
    top, bottom, unit = match.groups()
    one, many = tables.UNITS[unit]
    if bottom not in tables.FRACTION_DENOMINATORS or not 0 < int(top) < int(bottom):
        return f"{cardinal(top)} over {cardinal(bottom)} {many}"
    article = "an" if one[0] in "aeio" or one.startswith("hour") else "a"
    if (top, bottom) == ("1", "2"):
        return f"half {article} {one}"  # "half a pound"
    part = fraction(top, bottom)
    if top == "1":
        part = "a " + part.split(" ", 1)[1]  # "a quarter of a teaspoon"
    return f"{part} of {article} {one}"


def _ordinal(match: re.Match[str]) -> str:
    return ordinal(match.group(1))


def _vulgar(match: re.Match[str]) -> str:
    whole, symbol = match.groups()
    numerator, denominator = tables.VULGAR_FRACTIONS[symbol]
    return _mixed_number(whole, numerator, denominator)


def _mixed_number(whole: str | None, numerator: str, denominator: str) -> str:
    if not whole:
        return fraction(numerator, denominator)
    part = fraction(numerator, denominator)
    if numerator == "1":
        part = "a " + part.split(" ", 1)[1]
    return f"{cardinal(whole)} and {part}"


def _mixed_fraction(match: re.Match[str]) -> str:
    return _mixed_number(*match.groups())


def _slash(match: re.Match[str]) -> str:
    top, bottom = match.groups()
    if (top, bottom) == ("24", "7"):
        return "twenty four seven"
    whole_top = "." not in top
    if whole_top and top != bottom and int(top) + int(bottom) == 100:  # "the 80/20 rule"
        return f"{cardinal(top)} {cardinal(bottom)}"
    of_follows = match.string.startswith(" of", match.end())
    if whole_top and bottom in ("5", "10", "100") and (top == bottom or not of_follows):
        return f"{cardinal(top)} out of {cardinal(bottom)}"  # "a 10/10", "9/10 right"
    if top == bottom or "." in top:  # "50/50", "4.5/5"
        return f"{decimal(top)} {'out of ' if '.' in top else ''}{cardinal(bottom)}"
    if bottom in tables.FRACTION_DENOMINATORS and int(top) < int(bottom):
        return fraction(top, bottom)
    if 1 <= int(top) <= 12 and 1 <= int(bottom) <= 31:
        return _date(int(top), int(bottom), None)
    return f"{cardinal(top)} over {cardinal(bottom)}"


def _number_sign(match: re.Match[str]) -> str:
    return f"number {cardinal(match.group(1))}"


def _dimensions(match: re.Match[str]) -> str:
    width, height, unit = match.groups()
    spoken = f"{decimal(width)} by {decimal(height)}"
    if not unit:
        return spoken
    return f"{spoken} {tables.UNITS[unit][0 if qualifies_next_noun(match) else 1]}"  # "a 4x100m relay"


def _times(match: re.Match[str]) -> str:
    return f"{decimal(match.group(1))} times"


def _range(match: re.Match[str]) -> str:
    low, high = match.groups()
    if low == high:  # "a 50-50 chance"
        return f"{decimal(low)} {decimal(high)}"
    if re.match(r" (?:split|ratio|mix)\b", match.string[match.end() :]):  # "a 60-40 split"
        return f"{decimal(low)} {decimal(high)}"
    if re.fullmatch(_YEAR, low) and (re.fullmatch(_YEAR, high) or len(high) == 2):
        return f"{year(low)} to {_year_words(high) if len(high) == 2 else year(high)}"
    return f"{decimal(low)} to {decimal(high)}"


def _signed(match: re.Match[str]) -> str:
    return _sign(match.group(1)) + decimal(match.group(2))


def _cued_year(match: re.Match[str]) -> str:
    cue, first, joiner, second = match.groups()
    spoken = f"{cue} {year(first)}"
    return f"{spoken} {joiner} {year(second)}" if second else spoken


def _era_year(match: re.Match[str]) -> str:
    digits, era = match.groups()
    return f"{year(digits) if len(digits) == 4 else cardinal(digits)} {era}"


def _number(match: re.Match[str]) -> str:
    written = match.group()
    digits = written.replace(",", "")
    leading_zero = digits.startswith("0") and len(digits) > 1
    if "." not in written and (leading_zero or ("," not in written and len(digits) > 9)):
        return digits_one_by_one(digits)  # "007", account and serial numbers
    return decimal(written)


def _alternatives(words: Iterable[str]) -> str:
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


_MONTH = tables.MONTH_PATTERN
_YEAR_CUES = (r"Q[1-4]|(?i:in|since|by|from|until|till|through|year|circa|around|during|before|after"
              rf"|early|late|mid|of|between)|{_MONTH}")  # fmt: skip

_RULES: list[Rule] = [
    # phone numbers: "+44 20 7946 0958", "1-800-555-0199", "(555) 123-4567", "555-1234"
    (re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]\d{1,4}){2,5}(?![\w]|[.-]\d)"), _phone),
    (re.compile(r"(?<![\w.-])(?:1[-. ])?(?:\(\d{3}\) ?|\d{3}[-.])\d{3}[-.]\d{4}(?![\w]|[.-]\d)"), _phone),
    (re.compile(r"(?<![\w.,-])[2-9]\d{2}-\d{4}(?![\w]|[.-]\d)"), _phone),
    (re.compile(r"(?<![\w.,+-])0\d{2,4}(?: \d{3,6}){1,2}(?![\w]|[.,-]\d)"), _national_phone),
    # IP addresses and versions: "192.168.1.1", "v1.2", "2.0.3"
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)"), _ip),
    (re.compile(r"(?<![\w.])(v|V)(\d+(?:\.\d+)*)(?![\w]|\.\d)"), _version),
    (re.compile(r"(?<![\w.])()(\d+(?:\.\d+){2,})(?![\w]|\.\d)"), _version),
    # dates: "2024-03-05", "03/05/2024", "March 5th, 2024", "5 March 2024"
    (re.compile(r"(?<![\w.-])(\d{4})-(\d{2})-(\d{2})(?![\w]|-\d)"), _iso_date),
    (re.compile(r"(?<![\w/.])(\d{4})/(\d{1,2})/(\d{1,2})(?![\w/])"), _iso_date),
    (re.compile(r"(?<![\w/.])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\w/])"), _slash_date),
    (re.compile(rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,? ({_YEAR}))?(?![\w:])"), _month_day),
    (
        re.compile(
            rf"(?<![\w.,])(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MONTH})\b(?:\.(?= \d))?(?:,? ({_YEAR})\b)?"
        ),
        _day_month,
    ),
    # decades: "the 1990s", "the '90s", "her 30s"
    (
        re.compile(r"(?<![\w'’])(?:(1\d[0-9]0|20[0-9]0)|['’]?([1-9]0))['’]?s\b"),
        lambda m: _plural(year(m.group(1)) if m.group(1) else cardinal(m.group(2))),
    ),
    # years in two digits: "the summer of '69", "class of '05"
    (re.compile(r"(?<![\w'’])['’](\d\d)(?![\w'’]|[.,]\d)"), lambda m: _year_words(m[1])),
    # times: "9:00-10:30", "9-5pm", "5:30 p.m.", "5pm", "14:30", "9:00", "1:30:15"; ratios "16:9"
    (
        re.compile(
            rf"(?<![\w:.])(\d{{1,2}}(?::\d{{2}})?(?:\s?{_MERIDIEM})?){_DASH}(?=\d{{1,2}}(?::\d{{2}}|\s?{_MERIDIEM}))"
        ),
        lambda m: f"{m[1]} to ",
    ),
    (re.compile(r"(?<![\w:.])(\d{1,2})(?:[:.](\d{2}))?\s?([AaPp])(\.[Mm]\.|[Mm]\b)"), _time_of_day),
    (re.compile(r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\w:]|\.\d)"), _clock_time),
    (re.compile(r"(?<![\w:.])(\d+):(\d+)(?![\w:]|\.\d)"), lambda m: f"{cardinal(m[1])} to {cardinal(m[2])}"),
    # the 24-hour clock without a colon: "at 0730", "0800 hours", "1430 hours"
    (
        re.compile(
            r"(?<=\bat )(0\d)([0-5]\d)(?![\w]|[.,:]\d)|(?<![\w.,])([01]\d|2[0-3])([0-5]\d)(?= hours\b)"
        ),
        _military_time,
    ),
    # digit by digit: "911", "ZIP code 90210", "PIN 1234"; seconds glued to a decimal: "9.58s"
    (re.compile(r"(?<![\w.,-])911(?![\w]|[.,-]\d)"), lambda m: "nine one one"),
    (
        re.compile(
            r"\b((?:ZIP|[Zz]ip)(?: [Cc]ode)?|[Pp]ost ?code|PIN|[Pp]in code|(?:[Tt]ext|SMS)(?=\s\d+ to\b))"
            r"(:?\s(?:is\s|was\s|number\s)?)(\d{3,10})(?![\w]|[.,-]\d)"
        ),
        lambda m: f"{m[1]}{m[2]}{digits_one_by_one(m[3])}",
    ),
    (re.compile(rf"{_START}(\d+\.\d+)s\b"), lambda m: f"{decimal(m[1])} seconds"),
    (re.compile(r"\b[Ee]xt\.? ?(\d{2,6})\b"), lambda m: f"extension {digits_one_by_one(m[1])}"),
    # flight and house numbers in pairs: "Flight UA 901", "221B Baker Street", "1600 Pennsylvania Ave"
    (
        re.compile(r"\b([Ff]light) ([A-Z][A-Z0-9]|[0-9][A-Z]) ?(\d{1,4})\b"),
        lambda m: f"{m[1]} {m[2]} {_paired(m[3])}",
    ),
    (
        re.compile(
            r"(?<![\w.,$€£¥#+-])(\d{1,5})([A-Za-z]?)(?= (?:[A-Z][a-z]+ ){1,3}"
            r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Way|Court|Ct|Place|Pl|Square|Sq)\b)"
        ),
        lambda m: _paired(m[1]) + (f" {m[2].upper()}" if m[2] else ""),
    ),
    # heights: 6'2", "5 ft 4 in"
    (
        re.compile(r"(?<![\w.])(\d{1,2}) ?(?:ft|feet|foot) (\d{1,2}) ?(?:in|inches|inch)\b"),
        lambda m: f"{cardinal(m[1])} feet {cardinal(m[2])} {'inch' if m[2] == '1' else 'inches'}",
    ),
    (
        re.compile(r"(?<![\w.])(\d{1,2})['’]\s?(\d{1,2})(?:\"|''|”)"),
        lambda m: f"{cardinal(m[1])} feet {cardinal(m[2])} inches",
    ),
    # money: "$1,234.56", "$5 million", "$2.5M", "$5-10", "20€", "100 USD", "99¢"
    (
        re.compile(
            rf"{_START}{_SIGN}({_alternatives(tables.PREFIX_CURRENCIES)})\s?({_AMOUNT})"
            rf"(?:{_DASH}(?:{_alternatives(tables.PREFIX_CURRENCIES)})?({_AMOUNT}))?"
            r"(?:\s(thousand|million|billion|trillion)\b|(K|k|M|m|B|bn|tn)(?![\w]))?"
        ),
        _prefix_money,
    ),
    (
        re.compile(
            rf"{_START}{_SIGN}({_AMOUNT})(?:{_DASH}({_AMOUNT}))?\s?"
            rf"(€|£|¢|(?<=\s)(?:USD|EUR|GBP|JPY|CNY|RMB|INR|CAD|AUD|CHF)\b)"
        ),
        _suffix_money,
    ),
    (
        re.compile(r"(?<=[a-z])\s?/\s?(month|year|day|hour|week|night|person|mo|yr|hr)\b"),
        lambda m: " a " + _PERIODS.get(m[1], m[1]),
    ),
    # a fraction of a unit: "1/2 lb", "3/4 mi"
    (
        re.compile(rf"(?<![\w./])(\d+)/(\d+) ?({_alternatives(tables.UNITS)})(?![\w/])"),
        _fraction_of_unit,
    ),
    # percentages, units, ordinals: "5-10%", "-5°C", "100 km/h", "21st"
    (re.compile(rf"{_START}{_SIGN}({_AMOUNT})(?:\s?%?{_DASH}({_AMOUNT}))?\s?%"), _percent),
    (
        re.compile(
            rf"{_START}{_SIGN}({_AMOUNT})(?:{_DASH}({_AMOUNT}))?\s?({_alternatives(tables.UNITS)})(?![\w/])"
        ),
        _unit,
    ),
    (re.compile(rf"{_START}({_NUM})(st|nd|rd|th)\b"), _ordinal),
    # fractions: "2½", "1 1/2", "3/4", "24/7"; "#4521", "No. 5"
    (re.compile(rf"(?<![\w.,])(\d+)?\s?([{''.join(tables.VULGAR_FRACTIONS)}])"), _vulgar),
    (
        re.compile(r"(?<![\w./])(\d+) (\d+)/(\d+)(?![\w/])"),
        lambda m: _mixed_number(m[1], m[2], m[3]) if int(m[2]) < int(m[3]) else m.group(),
    ),
    (re.compile(r"(?<![\w./])(\d+(?:\.\d+)?)/(\d+)(?![\w/]|\.\d)"), _slash),
    (re.compile(r"(?<![\w&])#\s?(\d[\d,]*\d|\d)(?![\w])"), _number_sign),
    (re.compile(r"\bNo\.\s?(?=\d)"), lambda m: "number "),
    # "1920x1080", "2x faster"
    (
        re.compile(
            rf"{_START}(\d+(?:\.\d+)?)\s?[x×]\s?(\d+(?:\.\d+)?)(?:\s?({_alternatives(tables.UNITS)})(?![\w/]))?{_END}"
        ),
        _dimensions,
    ),
    (re.compile(rf"{_START}(\d+(?:\.\d+)?)x\b"), _times),
    # ranges and scores: "3-5 days", "1990-1995", "3-2"
    (re.compile(rf"(?<![\w.,-])({_AMOUNT}){_DASH}({_AMOUNT}){_END}"), _range),
    # years: "in 1999", "from 1990 to 2000", "March 2024", "1066 AD", "500 BC"
    (
        re.compile(rf"\b({_YEAR_CUES}) ({_YEAR})\b(?:\s(to|and|or|through) ({_YEAR})\b)?(?![.,]\d)"),
        _cued_year,
    ),
    (re.compile(r"(?<![\w.,])(\d{1,4}) ?(AD|BC|BCE|CE)\b"), _era_year),
    # a year the next word says is one: "1984 was a good year", "the 1984 election", "1999's best"
    (
        re.compile(
            rf"{CLAUSE_START}(1[5-9]\d\d|20\d\d)(?<!00)(?=['’]s\b|\s{YEAR_VERBS}\b)(?![.,]\d)"
            rf"|(?<![\w.,$€£¥#+-])({_YEAR})(?=\s(?i:{YEAR_NOUNS})\b)"
        ),
        lambda m: year(m[1] or m[2]),
    ),
    (
        re.compile(r"(?<![\w.,$€£¥#+-])(1[89]\d\d|20\d\d)(?=[.!?;:,]?(?:\s|$))(?![.,]\d)(?!\s[a-z])"),
        lambda m: year(m[1]),
    ),
    # signs: "-5", "+3", "±2"
    (re.compile(rf"(?<![\w.,])([-−+±])({_AMOUNT}){_END}"), _signed),
    # digits glued to letters: "MP3", "3D", "GPT-4" (before the number itself is read)
    (re.compile(r"(?<=[A-Za-z])-(?=\d)"), lambda m: " "),
    (re.compile(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])"), lambda m: " "),
    # every other number: "1,234", "3.14", ".5", "007"
    (re.compile(rf"(?<![\d,.]){_AMOUNT}(?!\d)"), _number),
]
