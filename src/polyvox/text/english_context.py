"""The words around an English number that say how it is read.

A four-digit number is a year when a verb that takes a year as its subject follows it ("1984 was a
good year", "2008 saw a crash") or a noun a year qualifies does ("the 1984 election", "a 2024
model"); it stays a count before anything else ("1984 people came", "1984 were there"). An amount
with its unit or currency is said in the singular when it qualifies the noun after it, between "a",
"an" or "the" and that noun ("a $5 bill" → "a five dollar bill", "the 100 m sprint" → "the one
hundred meter sprint"), and in the plural otherwise ("it cost $5", "the $5 it cost").
"""

from __future__ import annotations

import re

# Where a clause starts: the start of the text, after a clause's punctuation or a conjunction, so
# that "Page 1984 has it" stays a count.
_CLAUSE_WORDS = re.findall(
    r"\w+",
    "and but while when as since so that if because until then think thought believe know knew say said"
    " remember hope guess feel felt what how",
)
CLAUSE_START = (
    '(?:^|(?<=[.!?;:,] )|(?<=[("“‘])|'
    + "|".join(f"(?<=\\b{word} )|(?<=\\b{word.capitalize()} )" for word in _CLAUSE_WORDS)
    + ")"
)
# Said of a year, in the singular: "1984 was", "2008 saw". A count takes "were", "have", "came".
YEAR_VERBS = (
    r"(?:was|is|wasn['’]t|isn['’]t|has|hasn['’]t|saw|sees|brought|brings|marked|marks|began|begins|ended"
    r"|ends|became|proved|remains|remained|seemed|felt|feels|turned out|will be|would be|promises)"
)
# Nouns a year qualifies: "the 1984 election", "a 2024 model", "its 2023 budget".
YEAR_NOUNS = (
    r"(?:election|elections|season|census|budget|campaign|crisis|war|summit|olympics|world cup|championship"
    r"|championships|final|finals|tournament|edition|model|release|film|movie|album|novel|report|survey"
    r"|recession|earthquake|riots|revolution|tour|vintage|summer|winter|spring|autumn|harvest|class"
    r"|cohort|fiscal year|tax year|school year|academic year|calendar|catalog|catalogue|conference"
    r"|festival|ceremony|awards|oscars|draft|merger|pandemic|outbreak|referendum|primary|primaries"
    r"|deadline|target|plan|agreement|treaty|act|law|redesign|remake|reboot|sequel|rankings|ranking"
    r"|tsunami|hurricane|storm|wildfire|blackout|crash|coup|scandal|drought|heatwave|uprising"
    r"|world series|super bowl)"
)

_DETERMINER = re.compile(r"(?:^|\W)(?:a|an|the)\s$", re.IGNORECASE)
_NEXT_WORD = re.compile(r"\s([a-z]+)\b")
# Words after an amount that do not make it qualify them: "the $5 it cost", "a 5 km or so".
_NOT_QUALIFIED = frozenset(
    re.findall(
        r"\w+",
        "of for to in on at by with from and or but nor than per each a an the is was are were be been will"
        " would can could should may might must has have had that which who whom whose it its this these"
        " those he she we they you i me him her us them more less so too very then off up down out over"
        " under away back now here there today tonight yesterday tomorrow ago total plus minus extra left"
        " worth apiece instead already only just altogether overall each every either ahead behind since"
        " later earlier before after into onto across through around about above below beyond",
    )
)


def qualifies_next_noun(match: re.Match[str]) -> bool:
    """Whether the amount `match` stands between "a"/"an"/"the" and the noun it qualifies."""
    before = match.string[max(0, match.start() - 5) : match.start()]
    if not _DETERMINER.search(before):
        return False
    after = _NEXT_WORD.match(match.string, match.end())
    if after is None:
        return False
    word = after.group(1)
    return word not in _NOT_QUALIFIED and not word.endswith(("ed", "ly", "ing"))
