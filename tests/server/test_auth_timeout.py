"""The optional API key and the per-request deadline."""

from __future__ import annotations

import httpx
import openai
import pytest

from helpers.metrics import scrape, value
from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"


def test_api_key_guards_v1_routes_but_not_health(serve) -> None:
    url = serve(api_key="s3cret")
    denied = httpx.post(f"{url}{SPEECH}", json={"input": "hi"})
    assert denied.status_code == 401
    assert denied.json()["error"]["type"] == "authentication_error"
    assert httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(f"{url}/health").status_code == 200
    assert httpx.get(f"{url}/ready").status_code == 200

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).models.list()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="s3cret", max_retries=0)
    speech = client.audio.speech.create(model="tts-1", voice="alloy", input="hi", response_format="wav")
    assert speech.content[:4] == b"RIFF"


def test_request_past_its_deadline_is_504_and_frees_the_engine(serve) -> None:
    backend = FakeBackend(chunk_delay_s=0.05)
    url = serve(backend, request_timeout_s=0.3, max_concurrent_requests=1, max_queue=0)
    whole = {"input": "a" * 500, "response_format": "pcm", "stream": False}  # no byte before the deadline
    response = httpx.post(f"{url}{SPEECH}", json=whole)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "timeout"
    assert backend.active == 0 and backend.cancelled_requests == 1
    assert value(scrape(url), "polyvox_requests_in_flight") == 0
    assert httpx.post(f"{url}{SPEECH}", json={"input": "quick"}).status_code == 200
