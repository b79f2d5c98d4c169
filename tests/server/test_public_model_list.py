"""`public_model_list`: Open WebUI lists a TTS server's models and voices without a key
(`GET {base}/audio/models` and `GET {base}/audio/voices`, as its audio router does) and only sends
its key with speech. With keys on and the setting on, those lists (and OpenAI's /v1/models) answer
without a key; everything else still needs one. Off (the default), the lists need a key too."""

from __future__ import annotations

import httpx
import openai
import pytest

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

KEY = "webui-key"
LISTS = ("/v1/models", "/v1/audio/models", "/v1/audio/voices", "/v1/voices")


@pytest.fixture(scope="module")
def public_url():
    settings = Settings(api_keys=[KEY], admin_api_keys=["boss"], public_model_list=True)
    with running_server(create_app(settings, FakeBackend())) as url:
        yield url


def test_open_webui_reads_the_models_and_voices_without_a_key(public_url) -> None:
    base = f"{public_url}/v1"  # Open WebUI's "API Base URL"
    models = httpx.get(f"{base}/audio/models")
    voices = httpx.get(f"{base}/audio/voices")
    assert models.status_code == voices.status_code == 200
    model_ids = [model["id"] for model in models.json()["models"]]
    assert "tts-1" in model_ids and FakeBackend().info.model_id in model_ids
    voice_ids = {voice["id"]: voice["name"] for voice in voices.json()["voices"]}
    assert {"alloy", "nova"} <= set(voice_ids)  # polyvox's voices, not Open WebUI's fallback list
    # ...then speaks with its key, as it does
    speech = httpx.post(
        f"{base}/audio/speech",
        json={"model": "tts-1", "input": "Hello from Open WebUI.", "voice": "nova"},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert speech.status_code == 200 and speech.content


def test_every_public_list_and_a_model_card_answer_without_a_key(public_url) -> None:
    for path in LISTS:
        assert httpx.get(f"{public_url}{path}").status_code == 200, path
    assert httpx.get(f"{public_url}/v1/models/tts-1").json()["id"] == "tts-1"
    assert httpx.get(f"{public_url}/v1/models/no-such-model").status_code == 404


def test_everything_else_still_needs_a_key(public_url) -> None:
    refused = [
        ("POST", "/v1/audio/speech"),
        ("GET", "/v1/audio/voices/alloy"),  # a voice's details (a transcript, its clip's hash)
        ("GET", "/v1/audio/voice_consents"),
        ("POST", "/v1/audio/voices"),
        ("DELETE", "/v1/audio/voices/alloy"),
        ("POST", "/admin/reload-voices"),
        ("GET", "/v1/modelsx"),
    ]
    for method, path in refused:
        assert httpx.request(method, f"{public_url}{path}").status_code == 401, (method, path)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{public_url}/v1", api_key="wrong", max_retries=0).audio.speech.create(
            model="tts-1", voice="alloy", input="no key, no speech"
        )


def test_the_sdk_lists_models_with_any_key_when_public(public_url) -> None:
    client = openai.OpenAI(base_url=f"{public_url}/v1", api_key="not-a-key", max_retries=0)
    assert "tts-1" in [model.id for model in client.models.list()]


def test_off_by_default_the_lists_need_a_key() -> None:
    assert Settings().public_model_list is False
    with running_server(create_app(Settings(api_keys=[KEY]), FakeBackend())) as url:
        for path in LISTS:
            assert httpx.get(f"{url}{path}").status_code == 401, path
            assert httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
