"""The English front end's word tables: currencies, units of measure, months.

Each entry says how a symbol is read after one and after any other amount.
"""

from __future__ import annotations

from typing import NamedTuple


class Currency(NamedTuple):
    one: str
    many: str
    cent: str | None  # None: the currency has no minor unit people read ("¥1.50" is read as a decimal)
    cents: str | None


_DOLLAR = Currency("dollar", "dollars", "cent", "cents")
_EURO = Currency("euro", "euros", "cent", "cents")
_POUND = Currency("pound", "pounds", "penny", "pence")

# Symbols written before the amount ("$5", "€20", "US$5"); longest first when matched.
PREFIX_CURRENCIES: dict[str, Currency] = {
    "US$": Currency("US dollar", "US dollars", "cent", "cents"),
    "A$": Currency("Australian dollar", "Australian dollars", "cent", "cents"),
    "C$": Currency("Canadian dollar", "Canadian dollars", "cent", "cents"),
    "HK$": Currency("Hong Kong dollar", "Hong Kong dollars", "cent", "cents"),
    "NZ$": Currency("New Zealand dollar", "New Zealand dollars", "cent", "cents"),
    "S$": Currency("Singapore dollar", "Singapore dollars", "cent", "cents"),
    "R$": Currency("real", "reais", "centavo", "centavos"),
    "$": _DOLLAR,
    "€": _EURO,
    "£": _POUND,
    "¥": Currency("yen", "yen", None, None),
    "₹": Currency("rupee", "rupees", "paisa", "paise"),
    "₩": Currency("won", "won", None, None),
    "₽": Currency("ruble", "rubles", "kopeck", "kopecks"),
    "₺": Currency("lira", "lira", "kurus", "kurus"),
    "₪": Currency("shekel", "shekels", "agora", "agorot"),
    "₱": Currency("peso", "pesos", "centavo", "centavos"),
    "₦": Currency("naira", "naira", "kobo", "kobo"),
    "฿": Currency("baht", "baht", "satang", "satang"),
}
# Symbols and ISO codes written after the amount ("20€", "100 USD").
SUFFIX_CURRENCIES: dict[str, Currency] = {
    "€": _EURO,
    "£": _POUND,
    "USD": PREFIX_CURRENCIES["US$"],
    "EUR": _EURO,
    "GBP": _POUND,
    "JPY": Currency("yen", "yen", None, None),
    "CNY": Currency("yuan", "yuan", None, None),
    "RMB": Currency("yuan", "yuan", None, None),
    "INR": PREFIX_CURRENCIES["₹"],
    "CAD": PREFIX_CURRENCIES["C$"],
    "AUD": PREFIX_CURRENCIES["A$"],
    "CHF": Currency("Swiss franc", "Swiss francs", "centime", "centimes"),
}
# ISO codes are written before the amount too ("CHF 50", "USD 1,000").
PREFIX_CURRENCIES.update({code: currency for code, currency in SUFFIX_CURRENCIES.items() if code.isupper()})
MAGNITUDES = {"thousand": "thousand", "million": "million", "billion": "billion", "trillion": "trillion",
              "K": "thousand", "k": "thousand", "M": "million", "m": "million", "B": "billion",
              "bn": "billion", "tn": "trillion"}  # fmt: skip

# Units written after a number ("10 kg", "5km", "25°C"): (after one, after any other amount).
UNITS: dict[str, tuple[str, str]] = {
    "mg": ("milligram", "milligrams"), "g": ("gram", "grams"), "kg": ("kilogram", "kilograms"),
    "t": ("tonne", "tonnes"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "mm": ("millimeter", "millimeters"), "cm": ("centimeter", "centimeters"),
    "m": ("meter", "meters"), "km": ("kilometer", "kilometers"), "ft": ("foot", "feet"),
    "yd": ("yard", "yards"), "mi": ("mile", "miles"), "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"), "cl": ("centiliter", "centiliters"), "l": ("liter", "liters"),
    "L": ("liter", "liters"), "gal": ("gallon", "gallons"), "ha": ("hectare", "hectares"),
    "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"), "m/s": ("meter per second", "meters per second"),
    "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"), "secs": ("second", "seconds"),
    "min": ("minute", "minutes"), "mins": ("minute", "minutes"), "h": ("hour", "hours"),
    "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "PB": ("petabyte", "petabytes"), "kbps": ("kilobit per second",
    "kilobits per second"), "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"), "MB/s": ("megabyte per second",
    "megabytes per second"), "GB/s": ("gigabyte per second", "gigabytes per second"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "MW": ("megawatt", "megawatts"), "kWh": ("kilowatt hour", "kilowatt hours"), "V": ("volt", "volts"),
    "mA": ("milliamp", "milliamps"), "mAh": ("milliamp hour", "milliamp hours"),
    "dB": ("decibel", "decibels"), "cal": ("calorie", "calories"), "kcal": ("kilocalorie", "kilocalories"),
    "px": ("pixel", "pixels"), "tsp": ("teaspoon", "teaspoons"), "tbsp": ("tablespoon", "tablespoons"),
    "pts": ("point", "points"),
    "sq ft": ("square foot", "square feet"), "sq m": ("square meter", "square meters"),
    "m²": ("square meter", "square meters"), "km²": ("square kilometer", "square kilometers"),
    "°C": ("degree Celsius", "degrees Celsius"), "℃": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"), "℉": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
}  # fmt: skip

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
# A month as written: the name or its abbreviation ("Sept", "Dec."), capitalised.
MONTH_PATTERN = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
                 r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")  # fmt: skip


def month_name(written: str) -> str:
    """ "Sept" → "September"."""
    return next(name for name in MONTHS if name.startswith(written.rstrip(".")[:3]))


VULGAR_FRACTIONS = {"½": ("1", "2"), "⅓": ("1", "3"), "⅔": ("2", "3"), "¼": ("1", "4"), "¾": ("3", "4"),
                    "⅕": ("1", "5"), "⅛": ("1", "8"), "⅜": ("3", "8"), "⅝": ("5", "8"),
                    "⅞": ("7", "8")}  # fmt: skip
# Denominators read as a fraction ("3/4"); other "a/b" are dates or read "a over b".
FRACTION_DENOMINATORS = frozenset({"2", "3", "4", "5", "6", "8", "10", "16", "32", "64", "100"})
