import pytest

from polyvox.audio import FORMATS, UnsupportedFormat, UnsupportedSampleRate, get_format, resolve


def test_the_six_openai_formats_are_offered():
    assert set(FORMATS) == {"mp3", "opus", "aac", "flac", "wav", "pcm"}


@pytest.mark.parametrize(
    ("name", "mime"),
    [
        ("mp3", "audio/mpeg"),
        ("opus", "audio/ogg"),
        ("aac", "audio/aac"),
        ("flac", "audio/flac"),
        ("wav", "audio/wav"),
    ],
)
def test_standard_mime_types(name, mime):
    assert get_format(name).content_type(24000) == mime


def test_pcm_content_type_names_its_rate():
    assert get_format("pcm").content_type(24000) == "audio/pcm;rate=24000;channels=1"
    assert "rate=16000" in get_format("pcm").content_type(16000)


def test_default_rate_is_24k_for_every_format():
    for name in FORMATS:
        assert resolve(name) == (FORMATS[name], 24000)


def test_unknown_format_is_refused_with_the_choices():
    with pytest.raises(UnsupportedFormat, match="mp3, opus, aac, flac, wav, pcm") as info:
        get_format("ogg")
    assert info.value.param == "response_format"
    assert isinstance(info.value, ValueError)


def test_format_names_are_case_insensitive():
    assert get_format("MP3").name == "mp3"


@pytest.mark.parametrize(("name", "rate"), [("opus", 44100), ("opus", 22050), ("mp3", 96000), ("aac", 7000)])
def test_codec_rates_are_validated(name, rate):
    with pytest.raises(UnsupportedSampleRate, match=f"{rate} Hz") as info:
        resolve(name, rate)
    assert info.value.param == "sample_rate"


@pytest.mark.parametrize(("name", "rate"), [("opus", 48000), ("opus", 8000), ("mp3", 44100), ("wav", 44100)])
def test_codec_rates_are_accepted(name, rate):
    assert resolve(name, rate)[1] == rate


def test_lossless_rates_have_bounds():
    with pytest.raises(UnsupportedSampleRate):
        resolve("wav", 1000)
    with pytest.raises(UnsupportedSampleRate):
        resolve("flac", 1_000_000)
