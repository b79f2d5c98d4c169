"""The Wyoming port (Home Assistant's TTS protocol) of a real server on loopback, driven by the wyoming
package's own client: describe, a whole synthesize, the streaming form, bad events, a client that
leaves mid-answer, a named key's usage and streams, and the embedded voice."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import httpx
import numpy as np
import openai
import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from helpers.audio import pcm_samples
from helpers.serve_process import free_port
from polyvox.backends.fake import FakeBackend
from polyvox.settings import Settings
from voices.clips import wav_clip

RATE = 24000  # the fake engine's
SECONDS_PER_CHAR = 0.02


def poll_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


async def receive(client: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(client.read_event(), 60)
    assert event is not None, "the server closed the connection"
    return event


async def until(client: AsyncTcpClient, kind: str) -> list[Event]:
    """Events up to and including the first of type `kind`."""
    seen = []
    while True:
        seen.append(await receive(client))
        if seen[-1].type == kind:
            return seen


def audio_of(events: list[Event]) -> tuple[AudioStart, bytes]:
    """The audio-start and the PCM of one audio-start ... audio-stop answer (the chunks' format checked)."""
    kinds = [event.type for event in events]
    assert kinds[0] == "audio-start" and kinds[-1] == "audio-stop", kinds
    start = AudioStart.from_event(events[0])
    chunks = [AudioChunk.from_event(event) for event in events[1:-1]]
    assert chunks and all(event.type == "audio-chunk" for event in events[1:-1]), kinds
    for chunk in chunks:
        assert (chunk.rate, chunk.width, chunk.channels) == (start.rate, start.width, start.channels)
    return start, b"".join(chunk.audio for chunk in chunks)


def expected_samples(text: str, rate: int = RATE) -> int:
    return round(len(text) * SECONDS_PER_CHAR * rate)


def talk(port: int, scenario: Callable[[AsyncTcpClient], object]) -> None:
    async def run() -> None:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await scenario(client)

    asyncio.run(run())


def test_describe_lists_the_servers_voices_in_the_engines_languages(serve):
    port = free_port()
    url = serve(FakeBackend(), wyoming_port=port)
    http_voices = {voice["id"] for voice in httpx.get(f"{url}/v1/audio/voices").json()["voices"]}

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Describe().event())
        info = Info.from_event(await receive(client))
        (program,) = info.tts
        assert program.name == "polyvox" and program.supports_synthesize_streaming
        names = {voice.name for voice in program.voices}
        assert names == http_voices and "alloy" in names
        assert all(voice.languages == ["en"] for voice in program.voices)

    talk(port, scenario)


def test_a_whole_synthesize_streams_its_audio_as_it_is_made(serve):
    hold = threading.Event()
    backend = FakeBackend(hold_gate=hold, hold_after_s=0.1)  # the engine stops after 0.1 s until released
    port = free_port()
    serve(backend, wyoming_port=port)
    text = "Hello there, from polyvox."

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name="nova")).event())
        first = [await receive(client), await receive(client)]
        assert [event.type for event in first] == ["audio-start", "audio-chunk"]
        assert backend.active == 1  # the rest is not made yet
        hold.set()
        start, pcm = audio_of(first + await until(client, "audio-stop"))
        assert (start.rate, start.width, start.channels) == (RATE, 2, 1)
        samples = pcm_samples(pcm)
        assert samples.size == expected_samples(text)
        assert np.sqrt(np.mean(samples**2)) > 0.1  # the tone, not silence

    talk(port, scenario)
    assert backend.last_request is not None and backend.last_request.voice == "nova"


def test_the_streaming_form_speaks_each_sentence_as_it_completes(serve):
    backend = FakeBackend()
    port = free_port()
    serve(backend, wyoming_port=port)

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="alloy")).event())
        await client.write_event(SynthesizeChunk(text="The first sentence").event())
        await client.write_event(SynthesizeChunk(text=" is here. The sec").event())
        first = [await receive(client), await receive(client)]  # before the last text is sent
        assert [event.type for event in first] == ["audio-start", "audio-chunk"]
        assert backend.started_requests == 1
        await client.write_event(SynthesizeChunk(text="ond one ends here").event())
        await client.write_event(Synthesize(text="ignored: said for servers without streaming").event())
        await client.write_event(SynthesizeStop().event())
        rest = await until(client, "synthesize-stopped")
        _, pcm = audio_of(first + rest[:-1])
        assert SynthesizeStopped.is_type(rest[-1].type)
        spoken = ["The first sentence is here.", "The second one ends here"]
        assert pcm_samples(pcm).size == sum(expected_samples(sentence) for sentence in spoken)
        assert backend.started_requests == 2

    talk(port, scenario)


def test_a_bad_event_gets_an_error_and_the_connection_serves_on(serve):
    port = free_port()
    serve(FakeBackend(), wyoming_port=port)

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event())
        error = Error.from_event(await receive(client))
        assert error.code == "voice_not_found" and "nobody" in error.text
        await client.write_event(SynthesizeChunk(text="no stream is open").event())
        assert Error.from_event(await receive(client)).code == "no_stream"
        await client.write_event(Event(type="synthesize", data={"voice": {"name": "alloy"}}))  # no text
        assert Error.from_event(await receive(client)).code == "invalid_event"
        await client.write_event(Synthesize(text="Fine now.").event())
        _, pcm = audio_of(await until(client, "audio-stop"))
        assert pcm_samples(pcm).size == expected_samples("Fine now.")

    talk(port, scenario)

    async def garbage() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"this is not JSON\n")
        await writer.drain()
        error = Error.from_event(await asyncio.wait_for(async_read_event(reader), 30))
        assert error.code == "invalid_event"
        client = AsyncTcpClient("127.0.0.1", port)
        client._reader, client._writer = reader, writer  # the same connection, on with the official client
        await client.write_event(Synthesize(text="Still here.").event())
        _, pcm = audio_of(await until(client, "audio-stop"))
        assert pcm_samples(pcm).size == expected_samples("Still here.")
        await client.disconnect()

    asyncio.run(garbage())


def test_a_client_that_leaves_mid_answer_cancels_its_generation(serve):
    backend = FakeBackend(hold_gate=threading.Event(), hold_after_s=0.1)  # never released
    port = free_port()
    serve(backend, wyoming_port=port)

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text="A long answer nobody hears the end of.").event())
        assert (await receive(client)).type == "audio-start"
        assert (await receive(client)).type == "audio-chunk"
        assert backend.active == 1

    talk(port, scenario)  # leaves
    poll_until(lambda: backend.active == 0, "the generation is cancelled")
    assert backend.cancelled_requests == 1


def test_a_named_keys_voices_and_usage(serve, tmp_path):
    port = free_port()
    url = serve(
        FakeBackend(),
        wyoming_port=port,
        wyoming_api_key_name="kitchen",
        admin_api_keys=["admin-secret"],
        voices_dir=str(tmp_path),
    )
    admin = {"Authorization": "Bearer admin-secret"}

    async def refused(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text="Before the key.").event())
        assert Error.from_event(await receive(client)).code == "wyoming_key_not_found"

    talk(port, refused)
    made = httpx.post(f"{url}/admin/keys", json={"name": "kitchen"}, headers=admin)
    assert made.status_code == 201, made.text
    text = "Lights are off."

    async def spoken(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text=text).event())
        _, pcm = audio_of(await until(client, "audio-stop"))
        assert pcm_samples(pcm).size == expected_samples(text)

    talk(port, spoken)
    usage = httpx.get(f"{url}/v1/usage", headers=admin)
    assert usage.status_code == 200, usage.text
    assert "kitchen" in usage.text and str(len(text)) in usage.text, usage.text


def test_an_answer_is_one_of_the_named_keys_streams(serve, tmp_path):
    port = free_port()
    url = serve(
        FakeBackend(),
        wyoming_port=port,
        wyoming_api_key_name="kitchen",
        admin_api_keys=["admin-secret"],
        voices_dir=str(tmp_path),
    )
    limits = {"max_streams": 1}
    made = httpx.post(
        f"{url}/admin/keys",
        json={"name": "kitchen", "limits": limits},
        headers={"Authorization": "Bearer admin-secret"},
    )
    assert made.status_code == 201, made.text

    async def scenario() -> None:
        async with AsyncTcpClient("127.0.0.1", port) as first, AsyncTcpClient("127.0.0.1", port) as second:
            await first.write_event(SynthesizeStart().event())
            await first.write_event(SynthesizeChunk(text="Still thinking").event())
            await first.write_event(Describe().event())  # answered after the stream holds its place
            assert (await receive(first)).type == "info"
            await second.write_event(Synthesize(text="Me too.").event())
            assert Error.from_event(await receive(second)).code == "rate_limit_exceeded"
            await first.write_event(SynthesizeStop().event())
            events = await until(first, "synthesize-stopped")
            _, pcm = audio_of(events[:-1])
            assert pcm_samples(pcm).size == expected_samples("Still thinking")
            await second.write_event(Synthesize(text="Me too.").event())
            _, pcm = audio_of(await until(second, "audio-stop"))
            assert pcm_samples(pcm).size == expected_samples("Me too.")

    asyncio.run(scenario())


def test_the_named_keys_stored_voices_are_its_own_and_no_other_keys(serve, tmp_path):
    port = free_port()
    url = serve(
        FakeBackend(cloning=True),
        wyoming_port=port,
        wyoming_api_key_name="kitchen",
        admin_api_keys=["admin-secret"],
        voices_dir=str(tmp_path),
    )
    secrets = {}
    for name in ("kitchen", "garage"):
        made = httpx.post(
            f"{url}/admin/keys", json={"name": name}, headers={"Authorization": "Bearer admin-secret"}
        )
        secrets[name] = made.json()["key"]
    for owner in secrets:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=secrets[owner], max_retries=0)
        consent = client.audio.voice_consents.create(
            name="Ann", language="en-US", recording=("c.wav", wav_clip(2.0, pitch=140.0), "audio/wav")
        )
        sample = ("s.wav", wav_clip())
        client.audio.voices.create(name=f"{owner}-voice", consent=consent.id, audio_sample=sample)

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Describe().event())
        (program,) = Info.from_event(await receive(client)).tts
        names = {voice.name for voice in program.voices}
        assert "kitchen-voice" in names and "garage-voice" not in names and "alloy" in names
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="garage-voice")).event())
        assert Error.from_event(await receive(client)).code == "voice_not_found"
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="kitchen-voice")).event())
        _, pcm = audio_of(await until(client, "audio-stop"))
        assert pcm_samples(pcm).size == expected_samples("Hi.")

    talk(port, scenario)


def test_beyond_loopback_it_warns_that_wyoming_has_no_authentication(serve, caplog):
    port = free_port()
    with caplog.at_level(logging.WARNING, logger="polyvox.server.wyoming.server"):
        serve(FakeBackend(), wyoming_port=port, wyoming_host="0.0.0.0")
    warnings = [r.getMessage() for r in caplog.records if r.name == "polyvox.server.wyoming.server"]
    assert any("no authentication" in message and "0.0.0.0" in message for message in warnings), warnings

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Describe().event())
        assert (await receive(client)).type == "info"

    talk(port, scenario)


def test_it_is_off_by_default_and_on_loopback_says_nothing(serve, caplog):
    defaults = Settings()
    assert defaults.wyoming_port is None and defaults.wyoming_host == "127.0.0.1"
    port = free_port()
    with caplog.at_level(logging.WARNING, logger="polyvox.server.wyoming.server"):
        serve(FakeBackend(), wyoming_port=port)
    assert not [r for r in caplog.records if r.name == "polyvox.server.wyoming.server"]


def test_the_embedded_voice_speaks_through_wyoming(serve):
    embedded = pytest.importorskip("polyvox.backends.embedded")
    port = free_port()
    serve(embedded.EmbeddedBackend(), wyoming_port=port)
    text = "Hello from the embedded voice."

    async def scenario(client: AsyncTcpClient) -> None:
        await client.write_event(Synthesize(text=text).event())
        start, pcm = audio_of(await until(client, "audio-stop"))
        assert (start.rate, start.width, start.channels) == (22050, 2, 1)
        seconds = pcm_samples(pcm).size / start.rate
        assert 1.0 < seconds < 6.0, seconds

    talk(port, scenario)
