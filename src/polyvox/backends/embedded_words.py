"""The embedded voice's word times, exact: piper reports how many samples each phoneme of a sentence
lasts (its duration predictor's output, which the audio is made from), and `word_spans` turns those
into one span per spoken word of the sentence.

espeak joins some words into one phoneme word ("of the" is spoken `ʌvðɪ`), so phoneme words are not
counted against the text's: each word is phonemised on its own and its phonemes are matched (difflib)
against the sentence's, and a word is timed from the first to the last sentence phoneme matched to it.
A sentence phoneme left unmatched (espeak spoke the word a little differently in context) belongs to
the matched word it runs on from without a pause. Stress marks belong to their word; pauses
(punctuation, the sentence's start and end) belong to none; but the gap between two words spoken
without a pause (espeak's word separator, which piper gives a few frames) belongs to the word after it:
the model makes the transition into that word there (measured: starts then agree with an independent
alignment within about 20 ms, against about 65 ms late when the gap was left out). A word none of
whose phonemes matched (espeak reads "a" as `ə` in a sentence, `ɐ` alone) takes the phonemes no word
claimed between its matched neighbours (several such words share them out, marked approximate); a
word with no sound at all (a lone symbol) gets no time of its own: zero long where the word before it
ends, marked approximate.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Callable, Sequence

from polyvox.alignment.aligners import Span


def is_sound(phoneme: str) -> bool:
    """Whether a phoneme is part of a word (letters, length and stress marks, diacritics), not a pause."""
    return bool(phoneme) and all(unicodedata.category(char)[0] in "LM" for char in phoneme)


def word_spans(
    timed: Sequence[tuple[str, int]],
    words: Sequence[str],
    phonemize: Callable[[str], list[str]],
    sample_rate: int,
) -> list[Span]:
    """One span per word of `words` (seconds from the sentence's first sample), from the sentence's
    phonemes with their lengths in samples (`timed`, in order, as piper reports them) and `phonemize`
    (a word's phonemes, as the voice phonemises it alone)."""
    starts: list[int] = []
    ends: list[int] = []
    onsets: list[int] = []  # where a word beginning at this phoneme is heard to begin
    sounds: list[str] = []
    position = 0
    gap: int | None = None  # where a word gap began right after a sound (connected speech)
    after_sound = False
    for phoneme, samples in timed:
        if is_sound(phoneme):
            sounds.append(phoneme)
            starts.append(position)
            ends.append(position + samples)
            onsets.append(gap if gap is not None else position)
            gap, after_sound = None, True
        elif phoneme == " " and after_sound and gap is None:
            gap = position
        else:
            gap, after_sound = (gap if phoneme == " " else None), phoneme == " " and after_sound
        position += samples
    owner: list[int] = []  # the word each phoneme of the words phonemised one by one belongs to
    spoken: list[str] = []
    sounded = [False] * len(words)  # the word has a sound of its own (a lone symbol has none)
    for index, word in enumerate(words):
        for phoneme in phonemize(word):
            if is_sound(phoneme):
                spoken.append(phoneme)
                owner.append(index)
                sounded[index] = True
    first: list[int | None] = [None] * len(words)
    last: list[int | None] = [None] * len(words)
    matcher = difflib.SequenceMatcher(None, spoken, sounds, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            which, at = owner[block.a + offset], block.b + offset
            if first[which] is None:
                first[which] = at
            last[which] = at
    shared = _fill_unmatched(first, last, sounded, len(sounds))
    _widen(first, last, starts, ends)
    spans: list[Span] = []
    previous_end = 0
    for index in range(len(words)):
        begin, finish = first[index], last[index]
        if begin is None or finish is None:
            spans.append(Span(previous_end / sample_rate, previous_end / sample_rate, True))
            continue
        start = max(onsets[begin], previous_end)
        end = max(ends[finish], start)
        spans.append(Span(start / sample_rate, end / sample_rate, index in shared))
        previous_end = end
    return spans


def _fill_unmatched(
    first: list[int | None], last: list[int | None], sounded: list[bool], count: int
) -> set[int]:
    """Give the words none of whose phonemes matched (espeak spoke "a" as `ə` in the sentence, `ɐ` alone)
    the sentence phonemes no word claimed between their matched neighbours, in order: one such word takes
    them all; several share them out, and are returned (their times are approximate)."""
    shared: set[int] = set()
    previous_last, index = -1, 0
    while index < len(first):
        if (matched_last := last[index]) is not None:
            previous_last = matched_last
            index += 1
            continue
        after = index
        while after < len(first) and first[after] is None:
            after += 1
        following = first[after] if after < len(first) else count
        assert following is not None
        free = list(range(previous_last + 1, following))
        waiting = [word for word in range(index, after) if sounded[word]]
        if free and waiting:
            for position, word in enumerate(waiting):
                share = free[
                    position * len(free) // len(waiting) : (position + 1) * len(free) // len(waiting)
                ]
                if share:
                    first[word], last[word] = share[0], share[-1]
                    if len(waiting) > 1:
                        shared.add(word)
        index = after
    return shared


def _widen(first: list[int | None], last: list[int | None], starts: list[int], ends: list[int]) -> None:
    """Give each unmatched sentence phoneme to the word it touches without a pause: the word before it
    first (its end runs on), else the word after it (its start runs back)."""
    matched = [i for i in range(len(first)) if first[i] is not None]
    for position, word in enumerate(matched):
        end = last[word]
        following = first[matched[position + 1]] if position + 1 < len(matched) else len(starts)
        assert end is not None and following is not None
        while end + 1 < following and starts[end + 1] == ends[end]:
            end += 1
        last[word] = end
    for position, word in enumerate(matched):
        begin = first[word]
        preceding = last[matched[position - 1]] if position > 0 else -1
        assert begin is not None and preceding is not None
        while begin - 1 > preceding and ends[begin - 1] == starts[begin]:
            begin -= 1
        first[word] = begin
