"""What the speech and voice routes say about voices, checked with real clients on the embedded voice:
a request without `voice` speaks `alloy` (OpenAI requires the field; clients that omit it are served),
a one-off clone the engine refuses names the field the client sent it in, and builtin voices are
OpenAI `Voice` objects (an integer `created_at`, the same on every server, and a `type` of its enum)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from openai.types.audio import Voice
from websockets.sync.client import connect

from helpers.clips import wav_bytes
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"


def embedded_app(**settings):
    embedded = pytest.importorskip("polyvox.backends.embedded")
    return create_app(Settings(**settings), embedded.EmbeddedBackend(max_workers=1))


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    """With the audio cache on: an answer is the same as another when it is the other's cache hit."""
    with running_server(embedded_app(cache_enabled=True, cache_dir=tmp_path_factory.mktemp("c"))) as base:
        yield base


def clip() -> bytes:
    t = np.arange(36_000) / 24_000
    return wav_bytes(0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2)


def cache_status(url: str, **fields) -> str:
    answer = httpx.post(f"{url}{SPEECH}", json={"input": "Say it without a voice.", **fields})
    assert answer.status_code == 200, answer.text
    return answer.headers["x-cache"]


def test_a_request_without_a_voice_speaks_alloy(url: str) -> None:
    assert cache_status(url) == "MISS"
    assert cache_status(url, voice="alloy") == "HIT"  # the same answer
    assert cache_status(url, voice="onyx") == "MISS"


def test_a_refused_one_off_clone_names_the_field_it_came_in(url: str) -> None:
    data = base64.b64encode(clip()).decode()
    as_json = httpx.post(f"{url}{SPEECH}", json={"input": "Hello.", "ref_audio": data})
    assert as_json.status_code == 422
    assert (as_json.json()["error"]["param"], as_json.json()["error"]["code"]) == (
        "ref_audio",
        "cloning_unsupported",
    )
    for field in ("voice_file", "custom_voice_file", "speaker_wav"):
        uploaded = httpx.post(f"{url}{SPEECH}", data={"input": "Hello."}, files={field: ("me.wav", clip())})
        assert uploaded.status_code == 422
        assert uploaded.json()["error"]["param"] == field


def test_a_refused_clone_in_a_websocket_session_names_ref_audio(url: str) -> None:
    with connect(url.replace("http", "ws", 1) + f"{SPEECH}/ws") as ws:
        ws.send(json.dumps({"type": "config", "ref_audio": base64.b64encode(clip()).decode()}))
        ws.send(json.dumps({"type": "text", "text": "Hello there."}))
        ws.send(json.dumps({"type": "flush"}))
        while (message := json.loads(ws.recv(timeout=60)))["type"] != "error":
            pass
    assert (message["error"]["param"], message["error"]["code"]) == ("ref_audio", "cloning_unsupported")


def test_builtin_voices_are_openai_voice_objects_created_at_one_fixed_time(url: str) -> None:
    voices = httpx.get(f"{url}/ui/voices").json()["data"]
    with running_server(embedded_app()) as other:
        again = httpx.get(f"{other}/v1/audio/voices/alloy").json()
    builtin = [voice for voice in voices if voice["source"] == "builtin"]
    assert len(builtin) == 13
    for detail in builtin:
        voice = Voice.model_validate(detail, strict=True)  # created_at an int, type one of the enum
        assert voice.type == "audio_sample"  # the embedded voice's speakers were recorded, not designed
    assert {voice["created_at"] for voice in builtin} == {again["created_at"]}
