"""Several listeners of the embedded voice through a real server on loopback and the `openai` client.

The server speaks with the real piper voice on one worker (`Recording` from test_fair_embedded,
which holds the worker on a gate sentence until every request has queued). What is checked is what
the listeners notice: the order in which audio reaches them, and that a client who hangs up costs
nobody else a sentence.
"""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

from .test_fair_embedded import GATE, NAMES, Recording, script

PCM_RATE = 24000


@pytest.fixture
def served() -> tuple[Recording, str]:
    backend = Recording(max_workers=1)
    settings = Settings(normalize=False, piece_lookahead=1)
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as url:
        yield backend, url
        backend.release.set()


async def listen(client: openai.AsyncOpenAI, name: str, text: str, events: list[tuple[str, str]]) -> bytes:
    """Stream `text` as pcm, noting ("first", name) at its first audio and ("last", name) at its end."""
    audio = b""
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=text, response_format="pcm", stream_format="audio"
    ) as response:
        async for chunk in response.iter_bytes():
            if chunk and not audio:
                events.append(("first", name))
            audio += chunk
    events.append(("last", name))
    return audio


async def until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the server never reached the expected state"
        await asyncio.sleep(0.01)


def test_every_listener_hears_audio_before_any_listener_hears_the_end(served):
    backend, url = served

    async def scenario() -> tuple[list[tuple[str, str]], list[bytes]]:
        events: list[tuple[str, str]] = []
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            gate = asyncio.ensure_future(listen(client, "gate", GATE, []))
            await asyncio.to_thread(backend.gate_entered.wait, 30)
            talks = [asyncio.ensure_future(listen(client, n, script(n, 2), events)) for n in NAMES]
            await until(lambda: backend.sentences_waiting == 2 * len(NAMES))
            backend.release.set()
            await gate
            return events, await asyncio.gather(*talks)

    events, audios = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    firsts = [events.index(("first", name)) for name in NAMES]
    lasts = [events.index(("last", name)) for name in NAMES]
    assert max(firsts) < min(lasts), events
    for audio in audios:
        assert len(audio) / 2 / PCM_RATE > 2.0  # two sentences each, whole


def test_a_client_that_hangs_up_loses_its_queued_sentences_and_others_are_served(served):
    backend, url = served

    async def scenario() -> bytes:
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
            gate = asyncio.ensure_future(listen(client, "gate", GATE, []))
            await asyncio.to_thread(backend.gate_entered.wait, 30)
            leaving = asyncio.ensure_future(listen(client, "Alpha", script("Alpha"), []))
            await until(lambda: backend.sentences_waiting == 2)
            leaving.cancel()  # closes the connection before any audio came
            await asyncio.gather(leaving, return_exceptions=True)
            await until(lambda: backend.sentences_waiting == 0)
            staying = asyncio.ensure_future(listen(client, "Bravo", script("Bravo", 1), []))
            await until(lambda: backend.sentences_waiting == 1)
            backend.release.set()
            await gate
            return await staying

    audio = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert backend.spoken() == [("Bravo", 0)]
    assert len(audio) / 2 / PCM_RATE > 0.8
