"""The real embedded voice served over HTTP: every format decodes at its stated rate, streaming and
SSE deliver audio in pieces, speed changes duration, 50 concurrent requests complete, and Whisper
understands what it hears."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import openai
import pytest

from helpers.asr import transcribe, word_error_rate
from helpers.audio import decode, duration, opus_input_rate, pcm_samples

SPEECH = "/v1/audio/speech"
SHORT = "Hello there, this is a short test."
SENTENCES = "The first sentence is here. A second one follows it. And this is the third."


@pytest.fixture(scope="module")
def client(embedded_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{embedded_url}/v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_every_format_decodes_at_the_stated_rate(client: openai.OpenAI, fmt: str) -> None:
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input=SHORT, response_format=fmt)
    if fmt == "pcm":
        assert "rate=24000" in speech.response.headers["content-type"]
        seconds = len(speech.content) / 2 / 24000
    else:
        samples, rate = decode(speech.content)
        if fmt == "opus":
            assert (rate, opus_input_rate(speech.content)) == (48000, 24000)  # Opus always decodes at 48 kHz
        else:
            assert rate == 24000
        seconds = samples.size / rate
    assert 1.0 < seconds < 5.0


def test_streamed_speech_arrives_in_several_chunks(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input=SENTENCES,
        response_format="pcm",
        extra_body={"stream_format": "audio"},
    ) as response:
        chunks = [chunk for chunk in response.iter_bytes() if chunk]
    assert len(chunks) > 1
    assert 3.0 < duration(b"".join(chunks), "pcm") < 12.0


def test_sse_events_decode(embedded_url: str) -> None:
    body = {"input": SENTENCES, "response_format": "mp3", "stream_format": "sse"}
    deltas, done = [], None
    with httpx.stream("POST", f"{embedded_url}{SPEECH}", json=body, timeout=120) as response:
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: ")
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "speech.audio.delta":
                deltas.append(base64.b64decode(event["audio"]))
            else:
                done = event
    assert len(deltas) > 1
    assert done is not None and done["type"] == "speech.audio.done"
    samples, rate = decode(b"".join(deltas))
    assert rate == 24000
    # A streamed MP3 carries the encoder's delay (1105 samples) and pads its last frame (< 1152), so
    # the decoded audio is the spoken audio plus at most 2257 samples (4.7 output tokens at 50/s).
    extra_tokens = samples.size / rate * 50 - done["usage"]["output_tokens"]
    assert -1 <= extra_tokens <= 2257 / rate * 50 + 1


def test_speed_changes_duration(embedded_url: str) -> None:
    def seconds(speed: float) -> float:
        body = {"input": SENTENCES, "response_format": "pcm", "speed": speed}
        return duration(httpx.post(f"{embedded_url}{SPEECH}", json=body, timeout=120).content, "pcm")

    normal = seconds(1.0)
    assert seconds(0.5) / normal == pytest.approx(2.0, rel=0.2)
    assert seconds(2.0) / normal == pytest.approx(0.5, rel=0.2)


def test_fifty_concurrent_requests_all_complete(embedded_url: str) -> None:
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=embedded_url, timeout=300) as http:
            return await asyncio.gather(
                *(
                    http.post(SPEECH, json={"input": f"Request number {n}.", "response_format": "pcm"})
                    for n in range(50)
                )
            )

    responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * 50
    assert all(duration(r.content, "pcm") > 0.5 for r in responses)


def test_whisper_understands_the_served_speech(client: openai.OpenAI) -> None:
    text = "The weather is lovely today, so we will walk to the park."
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav")
    samples, rate = decode(speech.content)
    assert word_error_rate(text, transcribe(samples, rate)) < 0.25


def test_unspeakable_text_is_422(embedded_url: str) -> None:
    response = httpx.post(f"{embedded_url}{SPEECH}", json={"input": "你好，世界"})
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "input"


def test_pcm_speech_is_not_silent(embedded_url: str) -> None:
    body = {"input": SHORT, "response_format": "pcm"}
    samples = pcm_samples(httpx.post(f"{embedded_url}{SPEECH}", json=body).content)
    assert float(abs(samples).max()) > 0.1
