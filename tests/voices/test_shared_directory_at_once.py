"""Two servers sharing one voices directory and lexicon file without `state_url` (as the processes of
`api_server_count` do), asked one right after the other: a voice uploaded through one speaks at once
through the other, a voice deleted through one is refused at once by the other (which had spoken
with it), and a lexicon entry added through one is said at once by the other. Their background
reload runs only every 60 s, so nothing here passes by waiting for it. A fake engine that clones
serves; test_shared_directory does the same through two tiny VoxCPM2 `polyvox serve` processes."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode
from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings
from voices.clips import wav_clip

PAIRS = 10


@pytest.fixture
def servers(tmp_path) -> Iterator[tuple[str, str]]:
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            settings = Settings(
                voices_dir=tmp_path / "voices",
                lexicon_path=tmp_path / "lexicon.json",
                state_sync_interval_s=60,  # the background reload never runs within a test
            )
            backend = FakeBackend(cloning=True)
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
            urls.append(stack.enter_context(running_server(app)))
        yield urls[0], urls[1]


@functools.cache
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def upload(url: str, name: str) -> str:
    clip = ("clip.wav", wav_clip(1.2, pitch=150.0), "audio/wav")
    return client(url).audio.voices.create(name=name, consent="true", audio_sample=clip).id


def speak(url: str, voice: str | dict, text: str = "Hi.") -> np.ndarray | str:
    """The audio, or the error's code when refused."""
    try:
        audio = client(url).audio.speech.create(model="tts-1", voice=voice, input=text, response_format="wav")
    except openai.BadRequestError as exc:
        return exc.body["code"]
    return decode(audio.content)[0]


def test_a_voice_uploaded_through_one_server_speaks_at_once_through_the_other(servers):
    outcomes = []
    for i in range(PAIRS):
        there, here = servers if i % 2 == 0 else servers[::-1]
        outcomes.append(speak(here, {"id": upload(there, f"Uploaded {i}")}))
    assert [isinstance(o, np.ndarray) and o.size > 0 for o in outcomes] == [True] * PAIRS


def test_a_voice_deleted_through_one_server_is_refused_at_once_by_the_other(servers):
    voices = [upload(servers[0], f"Doomed {i}") for i in range(PAIRS)]
    for voice in voices:  # both servers hold each voice and have spoken with it
        assert all(isinstance(speak(url, {"id": voice}), np.ndarray) for url in servers)
    outcomes = []
    for i, voice in enumerate(voices):
        there, here = servers if i % 2 == 0 else servers[::-1]
        assert client(there).audio.voices.delete(voice).deleted
        outcome = speak(here, {"id": voice})
        outcomes.append(outcome if isinstance(outcome, str) else "spoke")
    assert outcomes == ["voice_not_found"] * PAIRS


def test_a_lexicon_entry_added_through_one_server_is_said_at_once_by_the_other(servers):
    a, b = servers
    plain = speak(b, "alloy", "Qxv.")
    added = httpx.post(f"{a}/admin/lexicon", json={"term": "Qxv", "say": "A longer replacement"})
    assert added.status_code == 201, added.text
    replaced = speak(b, "alloy", "Qxv.")
    assert isinstance(plain, np.ndarray) and isinstance(replaced, np.ndarray)
    assert replaced.size > 3 * plain.size  # B said the replacement, not the three letters
