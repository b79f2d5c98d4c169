"""LiveKit's ElevenLabs plugin (`elevenlabs.TTS(base_url=...)`, its multi-context socket with
`sync_alignment`) pointed at polyvox: with the embedded voice, audio frames arrive that a recogniser
hears as the text, and the word timings it builds from the alignment are in order, inside the audio and
on speech; against the fake engine, an interrupted stream stops while another on the same socket goes
on to its end, and closing the plugin lets go of the engine work; `synthesize` (HTTP) speaks too."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import numpy as np
import pytest
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT
from livekit.plugins import elevenlabs

from agents.conftest import VOICE
from agents.test_multi_context import LONG_A, RATE, Watched
from helpers.asr import HEARD_WER, transcribe, word_error_rate
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

TEXT = "The garden gate was open. Two cats sat on the warm stone wall."
HEARD = "the garden gate was open two cats sat on the warm stone wall"


def _tts(url: str, http: aiohttp.ClientSession, voice: str, rate: int) -> elevenlabs.TTS:
    return elevenlabs.TTS(
        api_key="not-needed-on-an-open-server",
        base_url=f"{url}/elevenlabs/v1",
        voice_id=voice,
        encoding=f"pcm_{rate}",
        http_session=http,
    )


async def _speak(url: str) -> tuple[np.ndarray, list]:
    async with aiohttp.ClientSession() as http:
        tts = _tts(url, http, VOICE, 24000)
        stream = tts.stream()
        stream.push_text(TEXT)
        stream.end_input()
        samples, words = [], []
        async for event in stream:
            samples.append(np.frombuffer(event.frame.data, dtype=np.int16).astype(np.float32) / 32768)
            words += event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])
        await stream.aclose()
        await tts.aclose()
    return np.concatenate(samples), words


def test_a_stream_is_heard_and_its_word_timings_line_up_with_its_audio(embedded_url):
    audio, words = asyncio.run(_speak(embedded_url))
    seconds = audio.size / 24000
    assert len(TEXT) / 30 < seconds < len(TEXT) / 5
    assert word_error_rate(HEARD, transcribe(audio, 24000)) <= HEARD_WER
    assert words, "no word timings: are they wired?"
    assert "".join(str(w) for w in words).split() == TEXT.split()
    starts = [w.start_time for w in words]
    assert starts == sorted(starts), "in order, across the two sentences"
    assert all(0 <= w.start_time <= w.end_time <= seconds + 0.01 for w in words)
    # On speech: each word's span carries sound (a time off by a sentence would land in the pause or
    # past the end), and the last word starts in the second half.
    for word in words:
        span = audio[
            int(word.start_time * 24000) : max(int(word.end_time * 24000), int(word.start_time * 24000) + 1)
        ]
        assert np.sqrt(np.mean(span**2)) > 0.01, (str(word), word.start_time, word.end_time)
    assert words[-1].start_time > seconds / 2


async def _interrupt_one_of_two(url: str, backend: Watched) -> tuple[int, int]:
    async with aiohttp.ClientSession() as http:
        tts = _tts(url, http, "alloy", RATE)
        interrupted, other = tts.stream(), tts.stream()
        interrupted.push_text(LONG_A)  # held by the engine after its first chunk
        interrupted.flush()
        other.push_text("Bananas are yellow. Cherries are red.")
        other.end_input()
        first = await anext(interrupted)
        assert first.frame.samples_per_channel > 0
        await interrupted.aclose()  # barge-in: LiveKit stops reading it and closes its context
        other_samples = 0
        async for event in other:
            other_samples += event.frame.samples_per_channel
        await other.aclose()
        assert any(text.startswith(Watched.HELD) for text in backend.generating)
        await tts.aclose()  # the plugin closed: its socket, and so the engine work, let go
    return first.frame.samples_per_channel, other_samples


def test_an_interrupted_stream_stops_the_other_goes_on_and_closing_lets_go(tmp_path):
    backend = Watched()
    with running_server(create_app(Settings(voices_dir=tmp_path), backend)) as url:
        _, other = asyncio.run(_interrupt_one_of_two(url, backend))
        expected = (len("Bananas are yellow.") + len("Cherries are red.")) * 0.02 * RATE
        assert abs(other - expected) <= 0.01 * RATE, "the other stream spoke to its end"
        deadline = time.monotonic() + 60
        while backend.generating:
            assert time.monotonic() < deadline, "the engine still generates for a closed plugin"
            time.sleep(0.02)


@pytest.mark.parametrize("encoding", ["mp3_22050_32"])
def test_the_plugins_default_encoding_decodes(embedded_url, encoding):
    async def run() -> int:
        async with aiohttp.ClientSession() as http:
            tts = elevenlabs.TTS(
                api_key="x", base_url=f"{embedded_url}/elevenlabs/v1", voice_id=VOICE, http_session=http
            )
            stream = tts.stream()
            stream.push_text("Hello there.")
            stream.end_input()
            samples = 0
            async for event in stream:
                samples += event.frame.samples_per_channel
            await tts.aclose()
            return samples

    samples = asyncio.run(run())
    assert 0.3 < samples / 22050 < 3


def test_synthesize_speaks_a_whole_text_over_http(embedded_url):
    async def run() -> np.ndarray:
        async with aiohttp.ClientSession() as http:
            tts = _tts(embedded_url, http, VOICE, 24000)
            frames = [event.frame async for event in tts.synthesize(TEXT)]
            await tts.aclose()
        return (
            np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames]).astype(np.float32) / 32768
        )

    audio = asyncio.run(run())
    assert len(TEXT) / 30 < audio.size / 24000 < len(TEXT) / 5
    assert word_error_rate(HEARD, transcribe(audio, 24000)) <= HEARD_WER
