"""ElevenLabs' character alignment derived from word timings, and its `output_format` values: what the
agent clients read, checked on hand-made words (the behaviour the sockets and routes rely on)."""

from __future__ import annotations

import pytest

from polyvox.alignment.words import WordTiming
from polyvox.server.elevenlabs.alignment import character_times
from polyvox.server.elevenlabs.output_format import parse_output_format
from polyvox.server.errors import APIError


def test_a_words_characters_share_its_span_and_the_gaps_go_to_what_is_between():
    words = [WordTiming("Hi,", 0.2, 0.5), WordTiming("you.", 0.7, 1.1)]
    times = character_times("Hi, you.", words, audio_end=1.5)
    assert times.chars == list("Hi, you.")
    assert times.starts[0] == 0.2 and times.ends[2] == pytest.approx(0.5)
    assert times.starts[3] == pytest.approx(0.5) and times.ends[3] == pytest.approx(0.7)  # the space
    assert times.starts[4] == pytest.approx(0.7)
    assert times.ends[-1] == 1.5, "the last character holds to the audio's end"
    assert times.starts == sorted(times.starts)
    assert times.settled == len("Hi, you.")


def test_text_before_the_first_word_starts_at_zero_and_a_word_not_in_the_text_is_skipped():
    times = character_times("  Go now", [WordTiming("Go", 0.4, 0.6), WordTiming("zzz", 0.6, 0.7)])
    assert times.starts[:2] == [0.0, 0.2] and times.starts[2] == 0.4
    assert times.settled == 4, "only up to the last word found is settled"


def test_the_socket_shape_is_whole_milliseconds_on_the_clock_asked():
    times = character_times("Ok", [WordTiming("Ok", 0.1, 0.3)])
    shape = times.as_socket(offset_s=2.0)
    assert shape == {"chars": ["O", "k"], "charStartTimesMs": [2100, 2200], "charDurationsMs": [100, 100]}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("mp3_44100_128", ("mp3", 44100, False)),
        ("pcm_16000", ("pcm", 16000, False)),
        ("pcm_22050", ("pcm", 22050, False)),
        ("pcm_44100", ("pcm", 44100, False)),
        ("ulaw_8000", ("pcm", 8000, True)),
        ("opus_48000_64", ("opus", 48000, False)),
        (None, ("mp3", 44100, False)),
    ],
)
def test_output_formats_polyvox_serves(value, expected):
    fmt = parse_output_format(value)
    assert (fmt.response_format, fmt.sample_rate, fmt.ulaw) == expected


@pytest.mark.parametrize(
    "value", ["alaw_8000", "ulaw_16000", "mp3_96000_192", "opus_22050_32", "flac", "pcm_x"]
)
def test_other_output_formats_are_a_400_naming_them(value):
    with pytest.raises(APIError) as refused:
        parse_output_format(value)
    assert refused.value.status_code == 400 and value in refused.value.message
    assert refused.value.param == "output_format"
