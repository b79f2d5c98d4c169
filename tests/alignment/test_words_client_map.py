"""The client's words for the spoken ones: unchanged tokens one to one, a changed run as one word over
its spoken words, nothing lost at either end; each piece's words on the answer's clock; subtitles and
the cache's bytes of an answer's pieces."""

from __future__ import annotations

import re

import pytest

from polyvox.alignment.aligners import Span
from polyvox.alignment.client_words import ClientWords, map_tokens
from polyvox.alignment.subtitles import subtitles
from polyvox.alignment.timeline import PieceTiming, Timeline, pieces_from_bytes, pieces_to_bytes
from polyvox.alignment.words import WordTiming


def mapped(client: str, spoken: str) -> list[tuple[str, list[str]]]:
    """Each client word with the spoken words it covers."""
    words = spoken.split()
    return [(e.word, words[e.first : e.last + 1]) for e in map_tokens(client.split(), words)]


def test_unchanged_words_map_one_to_one() -> None:
    assert mapped("Hello there, world.", "Hello there, world.") == [
        ("Hello", ["Hello"]), ("there,", ["there,"]), ("world.", ["world."]),
    ]  # fmt: skip


def test_a_changed_run_is_one_word_over_its_spoken_words() -> None:
    assert mapped("I paid $5 for 5 kg today.", "I paid five dollars for five kilograms today.") == [
        ("I", ["I"]), ("paid", ["paid"]), ("$5", ["five", "dollars"]), ("for", ["for"]),
        ("5 kg", ["five", "kilograms"]), ("today.", ["today."]),
    ]  # fmt: skip


def test_punctuation_and_case_moved_by_the_front_end_still_count_as_unchanged() -> None:
    assert mapped("(whispering) hello", "whispering, hello") == [
        ("(whispering)", ["whispering,"]), ("hello", ["hello"]),
    ]  # fmt: skip


def test_a_client_word_with_nothing_spoken_joins_a_neighbour() -> None:
    assert mapped("Stop — now", "Stop now") == [("Stop —", ["Stop"]), ("now", ["now"])]
    assert mapped("— Stop now", "Stop now") == [("— Stop", ["Stop"]), ("now", ["now"])]
    assert mapped("Stop now —", "Stop now") == [("Stop", ["Stop"]), ("now —", ["now"])]


def test_a_spoken_word_the_client_did_not_write_widens_a_neighbour() -> None:
    assert mapped("one two", "one and two") == [("one", ["one", "and"]), ("two", ["two"])]
    assert mapped("two", "and two") == [("two", ["and", "two"])]


def test_every_spoken_word_is_covered_once_in_order() -> None:
    client = "On 3/4/2021 at 10:30 we paid €1,234.50 for 3 items, i.e. 25% off."
    spoken = (
        "On March fourth, twenty twenty-one at ten thirty we paid one thousand two hundred thirty-four "
        "euros and fifty cents for three items, that is twenty-five percent off."
    )
    entries = map_tokens(client.split(), spoken.split())
    covered = [i for e in entries for i in range(e.first, e.last + 1)]
    assert covered == list(range(len(spoken.split())))
    assert " ".join(e.word for e in entries) == client


def test_a_piece_is_timed_on_the_answers_clock_and_a_word_over_two_pieces_waits_for_the_second() -> None:
    words = ClientWords("Hello big world. Bye.", ["Hello big", "world.", "Bye."])
    first = words.piece(0, 0.0, 1.0, [Span(0.1, 0.4, False), Span(0.5, 0.9, False)])
    assert first.words == (WordTiming("Hello", 0.1, 0.4), WordTiming("big", 0.5, 0.9))
    second = words.piece(1, 1.0, 2.0, [Span(0.2, 0.8, True)])
    assert second.words == (WordTiming("world.", 1.2, 1.8, approximate=True),)
    assert (second.start, second.end, second.text) == (1.0, 2.0, "world.")
    merged = ClientWords("x 5kg y", ["x five", "kilograms y"])  # "5kg" spoken across the seam
    assert merged.piece(0, 0.0, 1.0, [Span(0, 0.4, False), Span(0.5, 1.0, False)]).words == (
        WordTiming("x", 0, 0.4),
    )
    assert merged.piece(1, 1.0, 2.0, [Span(0, 0.5, False), Span(0.6, 1.0, False)]).words == (
        WordTiming("5kg", 0.5, 1.5), WordTiming("y", 1.6, 2.0),
    )  # fmt: skip


def test_spans_past_the_piece_are_kept_inside_it() -> None:
    words = ClientWords("a b", ["a b"])
    piece = words.piece(0, 2.0, 3.0, [Span(-0.5, 0.2, False), Span(0.9, 1.7, False)])
    assert [(w.start, w.end) for w in piece.words] == [(2.0, 2.2), (2.9, 3.0)]


def test_a_piece_with_the_wrong_number_of_spans_is_refused() -> None:
    with pytest.raises(ValueError):
        ClientWords("a b", ["a b"]).piece(0, 0.0, 1.0, [Span(0, 1, False)])


PIECES = (
    PieceTiming(
        0, "Hello there.", 0.0, 1.25, (WordTiming("Hello", 0.1, 0.5), WordTiming("there.", 0.6, 1.2))
    ),
    PieceTiming(1, "Bye.", 1.25, 3725.5, (WordTiming("Bye.", 1.3, 3725.4, approximate=True),)),
)


def test_the_timeline_scales_to_the_answers_clock_and_hands_each_piece_once() -> None:
    timeline = Timeline(scale=0.5)
    timeline.add(PIECES[0])
    assert [p.end for p in timeline.take()] == [0.625] and timeline.take() == []
    timeline.add(PIECES[1])
    assert [w.start for w in timeline.words] == [0.05, 0.3, 0.65]
    assert timeline.engine_pieces == list(PIECES)  # the cache keeps the engine's clock


def test_pieces_survive_the_caches_bytes() -> None:
    assert pieces_from_bytes(pieces_to_bytes(PIECES)) == PIECES
    assert pieces_from_bytes(b"[[1, 2]]") is None and pieces_from_bytes(b"\xff") is None


def test_subtitles_as_srt_and_vtt() -> None:
    assert subtitles(PIECES, "srt") == (
        "1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n2\n00:00:01,250 --> 01:02:05,500\nBye.\n"
    )
    vtt = subtitles(PIECES, "vtt", per_word=True)
    assert vtt.startswith("WEBVTT\n\n00:00:00.100 --> 00:00:00.500\nHello\n")
    assert re.findall(r"\n([A-Za-z.]+)\n", vtt) == ["Hello", "there.", "Bye."]


@pytest.mark.parametrize("seed", range(20))
def test_any_edit_covers_every_spoken_word_once_and_keeps_every_client_word(seed: int) -> None:
    import random

    rng = random.Random(seed)
    vocabulary = ["a", "b", "c", "5", "kg", "five", "kilograms", "—", "(x)", "x,"]
    client = [rng.choice(vocabulary) for _ in range(rng.randint(1, 12))]
    spoken = [rng.choice(vocabulary) for _ in range(rng.randint(1, 12))]
    entries = map_tokens(client, spoken)
    assert [i for e in entries for i in range(e.first, e.last + 1)] == list(range(len(spoken)))
    assert " ".join(e.word for e in entries).split() == client
