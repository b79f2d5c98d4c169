"""The Wyoming port on the tiny VoxCPM2 engine behind the text front end: a cloned voice speaks through
it, and a client that leaves mid-answer frees the engine (its running request and KV blocks)."""

from __future__ import annotations

import asyncio

import openai
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from helpers.serve_process import free_port
from voices.clips import wav_clip

from .conftest import LONG_WORD, PATCH_SAMPLES, PATCHES, poll_until


async def receive(client: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(client.read_event(), 120)
    assert event is not None, "the server closed the connection"
    return event


def test_a_cloned_voice_speaks_through_wyoming(tiny_server, tmp_path):
    port = free_port()
    url, backend = tiny_server(wyoming_port=port, voices_dir=tmp_path)
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    consent = sdk.audio.voice_consents.create(
        name="Ann", language="en-US", recording=("c.wav", wav_clip(2.0, 140.0), "audio/wav")
    )
    voice = sdk.audio.voices.create(
        name="Ann's voice", consent=consent.id, audio_sample=("s.wav", wav_clip(1.5, pitch=150.0))
    ).id

    async def scenario() -> None:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            (program,) = Info.from_event(await receive(client)).tts
            listed = {v.name: v.languages for v in program.voices}
            assert listed[voice] == ["en", "zh"]
            asked = Synthesize(text="Hello there.", voice=SynthesizeVoice(name=voice))
            await client.write_event(asked.event())
            start = AudioStart.from_event(await receive(client))
            assert (start.rate, start.width, start.channels) == (48000, 2, 1)
            pcm = b""
            while (event := await receive(client)).type == "audio-chunk":
                chunk = AudioChunk.from_event(event)
                assert (chunk.rate, chunk.width, chunk.channels) == (48000, 2, 1)
                pcm += chunk.audio
            assert event.type == "audio-stop"
            assert len(pcm) == PATCHES * PATCH_SAMPLES * 2

    asyncio.run(scenario())
    (request,) = backend.requests
    assert request.voice == voice and request.reference is not None  # spoken in the cloned voice


def test_leaving_mid_answer_frees_the_engine(tiny_server):
    port = free_port()
    url, backend = tiny_server(wyoming_port=port)
    stats = backend.inner.stats

    async def scenario() -> None:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text=f"One {LONG_WORD} of a sentence.").event())
            assert (await receive(client)).type == "audio-start"
            assert (await receive(client)).type == "audio-chunk"
            # the engine's counters are read from this thread while its step loop runs: wait for a reading
            # that shows the request held (its 300 patches take far longer than that)
            held = lambda: stats().running == 1 and stats().kv_blocks_used > 0  # noqa: E731
            poll_until(held, "the engine holds it", seen=stats)

    asyncio.run(scenario())
    poll_until(lambda: stats().running == 0 and stats().waiting == 0, "the request leaves the engine")
    assert stats().kv_blocks_used == 0
