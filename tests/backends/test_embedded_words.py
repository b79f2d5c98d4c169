"""Word spans from piper's phoneme lengths (hand-built here): a word from its first to its last
phoneme, the gap before a word in connected speech its own, pauses no one's, words espeak joined
("of the" as one phoneme word) split where their phonemes part, a word with no sound zero long."""

from __future__ import annotations

from polyvox.alignment.aligners import Span
from polyvox.backends.embedded_words import word_spans

RATE = 100  # one sample per 10 ms, so lengths read as centiseconds
ALONE = {"of": list("ʌv"), "the": list("ðə"), "cat.": ["k", "ˈ", "æ", "t", "."], "—": [], "a": ["ɐ"]}


def spans(timed: list[tuple[str, int]], words: str) -> list[tuple[float, float, bool]]:
    found = word_spans(timed, words.split(), lambda word: ALONE[word], RATE)
    assert all(isinstance(span, Span) for span in found)
    return [(span.start, span.end, span.approximate) for span in found]


def test_joined_words_split_where_their_phonemes_part_and_the_gap_goes_to_the_next_word() -> None:
    # espeak: "of the cat." as ^ ʌvðɪ ' ' kˈæt . $  (the joined word sounds "ðɪ", alone "ðə")
    timed = [("^", 5), ("ʌ", 10), ("v", 5), ("ð", 5), ("ɪ", 10), (" ", 4), ("k", 6), ("ˈ", 2), ("æ", 10),
             ("t", 5), (".", 8), ("$", 3)]  # fmt: skip
    assert spans(timed, "of the cat.") == [
        (0.05, 0.20, False),  # ʌv
        (0.20, 0.35, False),  # ð, and ɪ, which runs on from it without a pause
        (0.35, 0.62, False),  # the word gap before it, kˈæt; not the pause of the full stop
    ]


def test_a_word_after_a_pause_starts_at_its_first_sound() -> None:
    timed = [("^", 5), ("ʌ", 10), ("v", 5), (",", 20), (" ", 30), ("ɐ", 10), ("$", 3)]
    assert spans(timed, "of a") == [(0.05, 0.20, False), (0.70, 0.80, False)]


def test_a_word_with_no_sound_is_zero_long_where_the_one_before_ends() -> None:
    timed = [("^", 5), ("ʌ", 10), ("v", 5), (" ", 4), ("ɐ", 10), ("$", 3)]
    assert spans(timed, "of — a") == [(0.05, 0.20, False), (0.20, 0.20, True), (0.20, 0.34, False)]


def test_a_word_spoken_otherwise_in_the_sentence_takes_the_unclaimed_sounds_between_its_neighbours() -> None:
    # "of a cat." where espeak reads "a" as ə in the sentence but ɐ alone: nothing of it matches
    timed = [("^", 5), ("ʌ", 10), ("v", 5), (" ", 4), ("ə", 6), (" ", 4), ("k", 6), ("ˈ", 2), ("æ", 10),
             ("t", 5), (".", 8), ("$", 3)]  # fmt: skip
    assert spans(timed, "of a cat.") == [(0.05, 0.20, False), (0.20, 0.30, False), (0.30, 0.57, False)]
