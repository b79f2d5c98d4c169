"""Two `polyvox serve` processes (tiny random-weight VoxCPM2: cloning needs VoxCPM2) sharing one voices
directory and one lexicon file, without `state_url`, as `api_server_count` processes do: what a client
changes through one is what the other serves, at once for voices and consents, within
`state_sync_interval_s` for the lexicon, and concurrent lexicon edits through both all survive. And a
registry reloads for another server's change to the directory, never for its own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TypeVar

import httpx
import numpy as np
import openai
import pytest
from websockets.sync.client import connect

from helpers.audio import decode
from helpers.serve_process import polyvox_serve
from polyvox.backends.fake import FakeBackend
from polyvox.settings import Settings
from polyvox.voices.registry import VoiceRegistry
from polyvox.voices.store import VoiceEntry
from voices.clips import wav_clip

pytestmark = pytest.mark.timeout(240)

T = TypeVar("T")
TINY = ("--random-weights", "tiny", "--device", "cpu", "--no-engine-process", "--no-cache-enabled")
INTERVAL_S = 0.2


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """The URLs of two servers started side by side on the same voices directory and lexicon file."""
    shared = tmp_path_factory.mktemp("shared")
    flags = (
        *TINY,
        *("--voices-dir", str(shared / "voices"), "--lexicon-path", str(shared / "lexicon.json")),
        *("--state-sync-interval-s", str(INTERVAL_S), "--log-level", "warning"),
    )
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        started = pool.map(lambda _: stack.enter_context(polyvox_serve(*flags)), range(2))
        first, second = (url for _, url in started)
        yield first, second


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def speak(url: str, voice: str | dict, text: str = "Hello there.") -> np.ndarray:
    audio = client(url).audio.speech.create(
        model="voxcpm2", voice=voice, input=text, response_format="wav", extra_body={"seed": 7}
    )
    samples, rate = decode(audio.content)
    assert rate == 24000 and samples.size > 0 and np.isfinite(samples).all()
    return samples


def eventually(probe: Callable[[], T | None], timeout_s: float = 10.0) -> T:
    deadline = time.monotonic() + timeout_s
    while (result := probe()) is None or result is False:
        assert time.monotonic() < deadline, "the other server never caught up"
        time.sleep(INTERVAL_S / 2)
    return result


def test_a_voice_made_through_one_server_speaks_at_once_through_the_other_until_deleted(servers):
    a, b = servers
    consent = client(a).audio.voice_consents.create(
        name="Ann", language="en-US", recording=("consent.wav", wav_clip(2.5, 140.0), "audio/wav")
    )
    assert client(b).audio.voice_consents.retrieve(consent.id).name == "Ann"
    voice = client(b).audio.voices.create(  # cites the consent A stored
        name="Ann's voice",
        consent=consent.id,
        audio_sample=("ann.wav", wav_clip(1.5, pitch=150.0), "audio/wav"),
        extra_body={"transcript": "A short test clip."},
    )

    with connect(a.replace("http://", "ws://") + "/v1/audio/speech/ws") as ws:  # a session on A, at once
        ws.send(json.dumps({"type": "config", "voice": voice.id, "response_format": "pcm"}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready", ready
    on_a = speak(a, {"id": voice.id})  # asked at once, before any background check could run
    np.testing.assert_allclose(on_a, speak(b, {"id": voice.id}), atol=2e-4)  # the same voice
    assert np.abs(speak(a, "alloy") - on_a).max() > 2e-4
    listed = httpx.get(f"{a}/v1/audio/voices").json()["voices"]
    assert {"id": voice.id, "name": "Ann's voice"} in listed

    assert client(a).audio.voices.delete(voice.id).deleted
    assert httpx.get(f"{b}/v1/audio/voices/{voice.id}").status_code == 404
    with pytest.raises(openai.NotFoundError):
        client(b).audio.voices.delete(voice.id)
    with pytest.raises(openai.BadRequestError) as gone:
        speak(b, {"id": voice.id})
    assert gone.value.body["code"] == "voice_not_found"
    assert voice.id not in {v["id"] for v in httpx.get(f"{b}/v1/audio/voices").json()["voices"]}

    assert client(b).audio.voice_consents.delete(consent.id).deleted
    with pytest.raises(openai.NotFoundError):
        client(a).audio.voice_consents.retrieve(consent.id)


def lexicon_terms(url: str) -> dict[str, str]:
    return {item["term"]: item["say"] for item in httpx.get(f"{url}/admin/lexicon").json()["data"]}


def test_a_lexicon_entry_added_through_one_server_is_spoken_by_the_other(servers):
    a, b = servers
    plain = speak(b, "alloy", "Hello there.")
    added = httpx.post(f"{a}/admin/lexicon", json={"term": "Zork", "say": "Hello there"})
    assert added.status_code == 201, added.text

    eventually(lambda: lexicon_terms(b).get("Zork") == "Hello there")
    np.testing.assert_allclose(speak(b, "alloy", "Zork."), plain, atol=2e-4)


def test_lexicon_edits_sent_to_both_servers_at_once_all_survive(servers):
    terms = {f"term{i}": f"word {i}" for i in range(12)}

    def add(i_term: tuple[int, str]) -> int:
        i, term = i_term
        url = servers[i % 2]
        return httpx.post(f"{url}/admin/lexicon", json={"term": term, "say": terms[term]}).status_code

    with ThreadPoolExecutor(6) as pool:
        assert set(pool.map(add, enumerate(terms))) == {201}
    for url in servers:
        eventually(lambda u=url: terms.items() <= lexicon_terms(u).items())

    with ThreadPoolExecutor(6) as pool:
        statuses = pool.map(
            lambda i_t: httpx.delete(f"{servers[i_t[0] % 2]}/admin/lexicon/{i_t[1]}"), enumerate(terms)
        )
        assert {r.status_code for r in statuses} == {200}
    for url in servers:
        eventually(lambda u=url: not terms.keys() & lexicon_terms(u).keys())


def test_a_registry_reloads_for_another_servers_change_and_not_for_its_own(tmp_path):
    backend = FakeBackend(cloning=True)
    settings, info = Settings(voices_dir=tmp_path), backend.info
    one, other = VoiceRegistry.from_settings(settings, info), VoiceRegistry.from_settings(settings, info)
    one.reload(), other.reload()

    entry = VoiceEntry(audio="", consent=True, transcript="A clip.")
    asyncio.run(one.add("ann", wav_clip(1.5), "ann.wav", entry, backend))
    assert not one.refresh()  # its own change: nothing to reload
    assert other.refresh() and other.is_stored("ann")
    assert not other.refresh()  # nothing changed since

    other.delete("ann")
    assert one.refresh() and not one.is_stored("ann")
