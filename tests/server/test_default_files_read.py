"""The file a client gets by default reads in libsndfile (`soundfile`, which most of Python audio
reads with), in every format libsndfile reads: the official `openai` SDK's plain
`audio.speech.create`, unchanged. FLAC is answered whole by default (a streamed FLAC's STREAMINFO
cannot hold its length, and libsndfile refuses it); asked to stream, it still streams."""

from __future__ import annotations

import io

import httpx
import openai
import pytest
import soundfile

from polyvox.backends.fake import FakeBackend

TEXT = "a sentence of fifty characters, more or less, ok!!" * 2  # 100 chars -> 2.0 s of tone
SAMPLES = 48_000  # 2.0 s at 24 kHz
# Formats libsndfile reads here ("MP3" only where it was built with mpg123/LAME).
READABLE = ["wav", "flac", "opus"] + (["mp3"] if "MP3" in soundfile.available_formats() else [])
# A streamed MP3 has no Xing/LAME frame (it would need the length up front): its decoder keeps the
# encoder's delay and the last frame's padding, about 64 ms at 24 kHz.
MP3_PADDING = 2 * 1152


@pytest.fixture
def url(serve) -> str:
    return serve(FakeBackend(chunk_delay_s=0.01))


@pytest.mark.parametrize("fmt", READABLE)
def test_the_sdks_default_answer_reads_in_soundfile_to_its_length(url: str, fmt: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt)
    samples, rate = soundfile.read(io.BytesIO(speech.content))
    assert rate == 24_000
    if fmt == "mp3" and "content-length" not in speech.response.headers:
        assert SAMPLES <= samples.size <= SAMPLES + MP3_PADDING
    else:
        assert samples.size == SAMPLES


def test_flac_is_answered_whole_by_default_and_streams_when_asked(url: str) -> None:
    whole = httpx.post(f"{url}/v1/audio/speech", json={"input": TEXT, "response_format": "flac"})
    assert whole.headers["content-length"] == str(len(whole.content))
    for asked in ({"stream_format": "audio"}, {"stream": True}):
        with httpx.stream(
            "POST", f"{url}/v1/audio/speech", json={"input": TEXT, "response_format": "flac", **asked}
        ) as streamed:
            assert streamed.headers["transfer-encoding"] == "chunked", asked
            assert "content-length" not in streamed.headers
            streamed.read()
    with httpx.stream(
        "POST", f"{url}/v1/audio/speech/stream", json={"input": TEXT, "response_format": "flac"}
    ) as route:
        assert route.headers["transfer-encoding"] == "chunked"
