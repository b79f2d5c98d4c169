"""A whole answer (`"stream": false`) is a complete file, as libsndfile expects one: soundfile reads
every format it can (wav, flac, mp3, ogg opus; pcm as raw 16-bit), with the length its header declares
equal to the audio in it, from the engine and from the audio cache alike. Through a real server on
loopback around the embedded voice, with the official `openai` client; decoded by PyAV to compare."""

from __future__ import annotations

import io

import openai
import pytest
import soundfile

from helpers.audio import decode

pytest.importorskip("piper")

TEXT = "This answer in {fmt} is a whole file. Every reader should find out how long it is."  # a miss each
# Formats libsndfile reads (not aac, in ADTS): how soundfile is told to read each.
READS = {
    "wav": {},
    "flac": {},
    "mp3": {},
    "opus": {},
    "pcm": {"format": "RAW", "subtype": "PCM_16", "samplerate": 24000, "channels": 1},
}
# Encoder delay and padding a lossy file may add (mp3: whole 1152-sample frames; opus: 80 ms pre-skip).
SLACK_S = {"wav": 0.0, "flac": 0.0, "pcm": 0.0, "mp3": 0.1, "opus": 0.1}


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> openai.OpenAI:
    from helpers.server import running_server
    from polyvox.backends.embedded import EmbeddedBackend
    from polyvox.server.app import create_app
    from polyvox.settings import Settings

    settings = Settings(cache_enabled=True, cache_dir=tmp_path_factory.mktemp("whole-files") / "cache")
    with running_server(create_app(settings, EmbeddedBackend())) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key="unused")


def whole(client: openai.OpenAI, fmt: str) -> tuple[bytes, str]:
    response = client.audio.speech.with_raw_response.create(
        model="tts-1",
        voice="nova",
        input=TEXT.format(fmt=fmt),
        response_format=fmt,
        extra_body={"stream": False},
    )
    data = response.content
    assert int(response.headers["content-length"]) == len(data)
    return data, response.headers["x-cache"]


def check_readable(data: bytes, fmt: str) -> None:
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", **READS[fmt])
    assert rate == 24000 and samples.ndim == 1 and samples.size > 24000
    if fmt == "pcm":
        return  # raw samples: no header to declare a length
    assert soundfile.info(io.BytesIO(data)).frames == samples.size  # what it declares is what it holds
    decoded, decoded_rate = decode(data)  # PyAV, as an independent reading
    seconds = decoded.size / decoded_rate
    assert seconds - 0.005 <= samples.size / rate <= seconds + SLACK_S[fmt] + 0.005


@pytest.mark.parametrize("fmt", list(READS))
def test_whole_answers_and_their_cache_hits_are_files_soundfile_reads(client, fmt):
    data, status = whole(client, fmt)
    assert status == "MISS"
    check_readable(data, fmt)
    again, status = whole(client, fmt)
    assert status == "HIT"
    check_readable(again, fmt)
