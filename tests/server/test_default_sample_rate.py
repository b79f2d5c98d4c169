"""`default_sample_rate`: the output rate of wav, flac, mp3, opus and aac when a request names none.
Served by a tiny random-weight VoxCPM2 (48 kHz) on loopback, asked with the `openai` SDK, decoded
with PyAV. `pcm` stays at 24 kHz whatever the setting; a request's `sample_rate` always wins."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import numpy as np
import openai
import pytest

from helpers.audio import decode, opus_input_rate, pcm_samples
from helpers.backends import BackendWrapper
from helpers.server import running_server
from polyvox.audio import formats
from polyvox.backends.base import SynthesisRequest
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

PATCHES = 3  # every generation is exactly this long: 3 x 160 ms
PATCH_SAMPLES_48K = 7680
SELF_DESCRIBING = ("wav", "flac", "mp3", "opus", "aac")


class FixedLength(BackendWrapper):
    """The real VoxCPM2 engine, every generation forced to PATCHES patches (random weights stop anywhere)."""

    async def speak(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        forced = replace(request, min_patches=PATCHES, max_patches=PATCHES)
        async with contextlib.aclosing(self.inner.generate(forced)) as chunks:
            async for chunk in chunks:
                yield chunk


@pytest.fixture(scope="module")
def tiny_model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def client_for(tiny_model) -> Iterator:
    """`client_for(**settings)`: an `openai` client of a tiny VoxCPM2 server with those settings."""
    with contextlib.ExitStack() as stack:

        def start(**overrides) -> openai.OpenAI:
            settings = Settings(request_timeout_s=600, **overrides)
            backend = FixedLength(VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=256)))
            url = stack.enter_context(
                running_server(create_app(settings, backend, build_text_pipeline(settings, backend)))
            )
            return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)

        yield start


def speak(client: openai.OpenAI, fmt: str, **extra) -> openai.HttpxBinaryResponseContent:
    return client.audio.speech.create(
        model="tts-1", voice="alloy", input="Rate check.", response_format=fmt, extra_body=extra or None
    )


def rate_of(data: bytes, fmt: str) -> int:
    # an Opus decoder always outputs 48 kHz; the rate encoded is the one OpusHead declares
    return opus_input_rate(data) if fmt == "opus" else decode(data)[1]


def test_by_default_every_format_is_24_khz_as_openai_serves(client_for) -> None:
    client = client_for()
    for fmt in SELF_DESCRIBING:
        assert rate_of(speak(client, fmt).content, fmt) == 24000, fmt


def test_native_serves_the_engines_48_khz_and_pcm_stays_at_24(client_for) -> None:
    client = client_for(default_sample_rate="native")
    for fmt in SELF_DESCRIBING:
        assert rate_of(speak(client, fmt).content, fmt) == 48000, fmt
    pcm = speak(client, "pcm")
    assert pcm.response.headers["content-type"] == "audio/pcm;rate=24000;channels=1"
    samples = pcm_samples(pcm.content)
    assert abs(samples.size - PATCHES * PATCH_SAMPLES_48K // 2) <= 16  # 0.48 s at 24 kHz
    # a request's own rate wins over the setting, pcm included
    assert rate_of(speak(client, "wav", sample_rate=24000).content, "wav") == 24000
    assert (
        speak(client, "pcm", sample_rate=48000)
        .response.headers["content-type"]
        .startswith("audio/pcm;rate=48000")
    )


def test_a_number_is_fitted_to_what_each_codec_carries(client_for) -> None:
    client = client_for(default_sample_rate=44100)
    rates = {fmt: rate_of(speak(client, fmt).content, fmt) for fmt in SELF_DESCRIBING}
    assert rates["opus"] == 48000  # Opus has no 44.1 kHz: the next rate up
    assert rates["wav"] == rates["flac"] == rates["mp3"] == rates["aac"] == 44100
    with pytest.raises(openai.BadRequestError):  # asked for explicitly, a rate the codec lacks is refused
        speak(client, "opus", sample_rate=44100)


@pytest.mark.parametrize(
    ("fmt", "preferred", "expected"),
    [("opus", 22050, 24000), ("opus", 96000, 48000), ("mp3", 96000, 48000), ("aac", 22050, 22050)],
)
def test_fitting_a_rate_to_a_codec(fmt: str, preferred: int, expected: int) -> None:
    """The embedded voice's 22.05 kHz and a 96 kHz engine, fitted where the codec lacks the rate."""
    assert formats.resolve(fmt, None, preferred)[1] == expected
    assert formats.resolve("pcm", None, preferred)[1] == 24000
