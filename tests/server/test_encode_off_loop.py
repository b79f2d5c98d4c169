"""Response audio is resampled and encoded beside the event loop, never on it: while many streams
encode, the server still answers a /health probe, each stream's audio arrives whole and in order, and
no resample or encode call of a response ever runs in a thread that is running an event loop.

Served through a real uvicorn server on loopback with the official `openai` client; audio decoded
with PyAV (tests/helpers/audio.py). The encode calls are observed by wrapping the real methods, which
still do the work: only where they ran is recorded."""

from __future__ import annotations

import asyncio
import functools

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import duration, pcm_samples
from polyvox.audio.encode import StreamEncoder
from polyvox.audio.pipeline import OutputPipeline
from polyvox.audio.resample import Resampler
from polyvox.backends.fake import FakeBackend

ENGINE_RATE = 48_000
STREAMS = 16
CHARS = 1000  # 20 s of the fake engine's tone per stream: 125 chunks of 160 ms


def engine() -> FakeBackend:
    """The fake tone engine at VoxCPM2's rate and chunk size."""
    return FakeBackend(sample_rate=ENGINE_RATE, seconds_per_char=0.02, chunk_s=0.16)


def expected_tone(seconds: float, rate: int) -> np.ndarray:
    """What the fake engine says: a 0.3 amplitude 440 Hz sine from t = 0 (an independent copy)."""
    t = np.arange(round(seconds * rate)) / rate
    return 0.3 * np.sin(2 * np.pi * 440.0 * t)


async def stream(
    client: openai.AsyncOpenAI, fmt: str, started: asyncio.Event | None = None, **extra
) -> bytes:
    audio = b""
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="a" * CHARS, response_format=fmt, extra_body=extra or None
    ) as response:
        async for chunk in response.iter_bytes():
            audio += chunk
            if started is not None and chunk:
                started.set()
    return audio


def test_health_answers_while_many_streams_encode(serve):
    url = serve(engine())

    async def scenario() -> tuple[int, int, list[bytes]]:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300)
        started = [asyncio.Event() for _ in range(STREAMS)]
        streams = [asyncio.create_task(stream(client, "mp3", started[i])) for i in range(STREAMS)]
        await asyncio.gather(*(event.wait() for event in started))
        async with httpx.AsyncClient(timeout=60) as probe:
            health = await probe.get(f"{url}/health")
        still_streaming = sum(not task.done() for task in streams)
        return health.status_code, still_streaming, await asyncio.gather(*streams)

    status, still_streaming, bodies = asyncio.run(scenario())
    assert status == 200
    assert still_streaming == STREAMS  # the probe was answered in the middle of the encoding, not after it
    for body in bodies:
        assert duration(body, "mp3") == pytest.approx(CHARS * 0.02, abs=0.1)


def test_concurrent_streams_each_arrive_whole_and_in_order(serve):
    """pcm at the engine's own rate is the engine's samples as 16-bit integers: a chunk out of place,
    lost or doubled in any stream would show as a difference from the tone."""
    url = serve(engine())

    async def scenario() -> list[bytes]:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300)
        return await asyncio.gather(*(stream(client, "pcm", sample_rate=ENGINE_RATE) for _ in range(STREAMS)))

    want = expected_tone(CHARS * 0.02, ENGINE_RATE)
    for body in asyncio.run(scenario()):
        heard = pcm_samples(body)
        assert heard.size == want.size
        assert np.max(np.abs(heard - want)) < 2 / 32768  # 16-bit rounding, nothing else


@pytest.fixture
def where_audio_work_ran(monkeypatch) -> list[bool]:
    """For every resample, encode, pipeline construction and release from now on: whether its thread
    was running an event loop at the time."""
    on_loop: list[bool] = []

    def observed(method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            try:
                asyncio.get_running_loop()
                on_loop.append(True)
            except RuntimeError:
                on_loop.append(False)
            return method(*args, **kwargs)

        return wrapper

    for owner, name in (
        (StreamEncoder, "encode"),
        (StreamEncoder, "finish"),
        (Resampler, "process"),
        (OutputPipeline, "__init__"),
        (OutputPipeline, "close"),  # every answer's, once it ends
    ):
        monkeypatch.setattr(owner, name, observed(getattr(owner, name)))
    return on_loop


def test_no_response_is_encoded_on_the_event_loop(serve, where_audio_work_ran):
    url = serve(engine())

    async def scenario() -> list[bytes]:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=300)
        whole = client.audio.speech.create(
            model="tts-1", voice="alloy", input="a" * 100, response_format="wav", extra_body={"stream": False}
        )
        streamed = [stream(client, fmt) for fmt in ("mp3", "opus", "aac", "flac", "wav", "pcm")]
        bodies = await asyncio.gather(whole, *streamed)
        return [bodies[0].content, *bodies[1:]]

    bodies = asyncio.run(scenario())
    assert all(bodies)
    assert len(where_audio_work_ran) > 6 * 125  # every chunk of every stream was seen
    assert not any(where_audio_work_ran)


def test_the_embedded_voice_is_encoded_off_the_event_loop(embedded_url, where_audio_work_ran):
    async def scenario() -> list[bytes]:
        client = openai.AsyncOpenAI(base_url=f"{embedded_url}/v1", api_key="unused", timeout=300)
        texts = [f"Listener {i} hears this sentence, and then a second one." for i in range(4)]
        return await asyncio.gather(
            *(
                client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="mp3")
                for text in texts
            )
        )

    bodies = asyncio.run(scenario())
    assert all(duration(body.content, "mp3") > 1.0 for body in bodies)
    assert where_audio_work_ran and not any(where_audio_work_ran)
