"""/v1/models, /v1/audio/voices (Open WebUI's shape) and /v1/voices (uttera-tts-vllm's shape)."""

from __future__ import annotations

import httpx
import openai

from polyvox.backends.base import OPENAI_VOICES
from polyvox.backends.fake import FakeBackend


def test_models_list_through_the_openai_client(serve) -> None:
    url = serve()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    ids = [model.id for model in client.models.list()]
    assert ids[0] == "polyvox-fake"
    assert "tts-1" in ids
    assert client.models.retrieve("polyvox-fake").id == "polyvox-fake"
    assert httpx.get(f"{url}/v1/models/nope").status_code == 404


def test_open_webui_voice_list(serve) -> None:
    url = serve(FakeBackend(voices=("alloy", "narrator")))
    body = httpx.get(f"{url}/v1/audio/voices").json()
    ids = [voice["id"] for voice in body["voices"]]
    assert set(OPENAI_VOICES) <= set(ids)
    assert "narrator" in ids
    assert all(set(voice) == {"id", "name"} and voice["name"] for voice in body["voices"])


def test_seed_voice_list_shape(serve) -> None:
    url = serve()
    body = httpx.get(f"{url}/v1/voices").json()
    assert body["object"] == "list"
    assert body["default"] == "alloy"
    assert {voice["id"] for voice in body["data"]} == set(OPENAI_VOICES)
    assert all(voice["object"] == "voice" for voice in body["data"])


def test_an_engine_voice_can_be_requested(serve) -> None:
    url = serve(FakeBackend(voices=("narrator",)))
    response = httpx.post(f"{url}/v1/audio/speech", json={"input": "hello", "voice": "narrator"})
    assert response.status_code == 200
