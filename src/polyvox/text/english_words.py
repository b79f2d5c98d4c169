"""English words for numbers written in digits: counts, ordinals, years, decimals, digit strings.

The words come from `num2words` (the `text` extra), written the way the rest of the front end writes
them: no commas or hyphens ("one thousand two hundred and thirty four"), since a comma would be read
as a pause.
"""

from __future__ import annotations

from num2words import num2words  # type: ignore[import-untyped]

_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _plain(words: str) -> str:
    return " ".join(words.replace(",", " ").replace("-", " ").split())


_MOST_DIGITS = 16  # up to the quadrillions; longer numbers are read digit by digit


def cardinal(digits: str) -> str:
    """ "1,234" → "one thousand two hundred and thirty four"; thousands separators allowed."""
    plain = digits.replace(",", "")
    if len(plain.lstrip("0")) > _MOST_DIGITS:
        return digits_one_by_one(plain)
    return _plain(num2words(int(plain)))


def ordinal(digits: str) -> str:
    """ "21" → "twenty first"."""
    plain = digits.replace(",", "")
    if len(plain.lstrip("0")) > _MOST_DIGITS:
        return digits_one_by_one(plain)
    return _plain(num2words(int(plain), to="ordinal"))


def year(digits: str) -> str:
    """ "1999" → "nineteen ninety nine", "1905" → "nineteen oh five", "2005" → "two thousand and five"."""
    return _plain(num2words(int(digits), to="year"))


def digits_one_by_one(digits: str) -> str:
    """ "0199" → "zero one nine nine"; anything but a digit is skipped."""
    return " ".join(_DIGITS[int(d)] for d in digits if d.isdigit())


def decimal(number: str) -> str:
    """ "3.14" → "three point one four", ".5" → "point five", "1,234" → a cardinal."""
    whole, _, fraction = number.partition(".")
    spoken = cardinal(whole) if whole else ""
    if fraction:
        spoken = f"{spoken} point {digits_one_by_one(fraction)}".strip()
    return spoken


def is_one(number: str) -> bool:
    """Whether a written amount takes a singular noun ("1 kg", not "1.5 kg" or "1.0 kg")."""
    return number == "1"


def plural_ordinal(number: str) -> str:
    """The denominator of a fraction: "4" with a count of 3 reads "quarters"; see `fraction`."""
    return ordinal(number) + "s"


def fraction(numerator: str, denominator: str) -> str:
    """ "3", "4" → "three quarters"; "1", "2" → "one half"."""
    one = numerator == "1"
    if denominator == "2":
        noun = "half" if one else "halves"
    elif denominator == "4":
        noun = "quarter" if one else "quarters"
    else:
        noun = ordinal(denominator) if one else plural_ordinal(denominator)
    return f"{cardinal(numerator)} {noun}"
