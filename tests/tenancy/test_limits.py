"""Per-key limits through a real server and the official client: a key over its requests or
characters per minute, or its streams at once, gets 429 `rate_limit_exceeded` with Retry-After and
OpenAI's x-ratelimit headers while another key is served; keys of the settings have no limits."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest
from websockets.sync.client import connect

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.app_state import app_state
from polyvox.settings import Settings

ADMIN = "limits-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# The limiter's clock stands still a second into a minute: what a test counts falls in one window
# however long it takes (limits count per calendar minute), and no test waits for a minute to turn.
STILL = 1_800_000_001.0


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, threading.Event]]:
    hold = threading.Event()
    hold.set()
    backend = FakeBackend(hold_gate=hold, hold_after_s=0.1)
    settings = Settings(voices_dir=tmp_path_factory.mktemp("voices"), admin_api_keys=[ADMIN])
    app = create_app(settings, backend)
    app_state(app).tenancy.limiter.clock = lambda: STILL
    with running_server(app) as url:
        yield url, hold


def make_key(url: str, name: str, **limits: int) -> str:
    made = httpx.post(f"{url}/admin/keys", json={"name": name, "limits": limits}, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    return made.json()["key"]


def speak(url: str, key: str, text: str = "hi") -> bytes:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    return client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav").content


def raw_speak(url: str, key: str, text: str = "hi") -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "wav"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=30)


def test_a_key_past_its_requests_per_minute_is_refused_while_another_is_served(server) -> None:
    url, _ = server
    slow, fast = (
        make_key(url, "rpm-slow", requests_per_minute=2),
        make_key(url, "rpm-fast", requests_per_minute=50),
    )
    first = raw_speak(url, slow)
    assert first.status_code == 200
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert speak(url, slow)[:4] == b"RIFF"
    with pytest.raises(openai.RateLimitError) as refused:
        speak(url, slow)
    answer = refused.value.response
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"
    assert answer.json()["error"]["type"] == "rate_limit_error"
    assert 1 <= int(answer.headers["retry-after"]) <= 60
    assert answer.headers["x-ratelimit-remaining-requests"] == "0"
    assert answer.headers["x-ratelimit-reset-requests"].endswith("s")
    for _ in range(5):
        assert speak(url, fast)[:4] == b"RIFF"


def test_a_key_past_its_characters_per_minute_is_refused_with_token_headers(server) -> None:
    url, _ = server
    key = make_key(url, "chars-ten", characters_per_minute=10)
    served = raw_speak(url, key, "12345678")
    assert served.status_code == 200 and served.headers["x-ratelimit-remaining-tokens"] == "2"
    refused = raw_speak(url, key, "abcdef")
    assert refused.status_code == 429, refused.text
    assert refused.headers["x-ratelimit-limit-tokens"] == "10"
    assert refused.headers["x-ratelimit-remaining-tokens"] == "2"
    assert "characters" in refused.json()["error"]["message"]
    assert raw_speak(url, key, "ab").status_code == 200  # what is left still fits


def test_a_key_at_its_streams_is_refused_another_until_one_ends(server) -> None:
    url, hold = server
    key = make_key(url, "one-stream", max_streams=1)
    other = make_key(url, "other-stream", max_streams=1)
    hold.clear()
    body = {
        "model": "tts-1",
        "voice": "alloy",
        "input": "a long sentence held open",
        "response_format": "pcm",
    }
    try:
        with httpx.stream(
            "POST", f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=30
        ) as held:
            assert held.status_code == 200
            pieces = held.iter_bytes()  # kept: dropping it would close the stream
            next(pieces)  # streaming, and held by the engine
            second = raw_speak(url, key)
            assert second.status_code == 429, second.text
            assert "streams" in second.json()["error"]["message"] and second.headers["retry-after"]
            assert raw_speak(url, other).status_code == 200
            hold.set()
            assert sum(len(piece) for piece in pieces) > 0
    finally:
        hold.set()
    assert raw_speak(url, key).status_code == 200


def test_a_one_stream_key_speaks_back_to_back_on_one_keep_alive_connection(server) -> None:
    url, _ = server
    key = make_key(url, "back-to-back", max_streams=1)
    body = {"model": "tts-1", "voice": "alloy", "input": "next one", "response_format": "wav"}
    with httpx.Client(headers=bearer(key), timeout=30) as client:  # one connection, kept alive
        statuses = [client.post(f"{url}/v1/audio/speech", json=body).status_code for _ in range(6)]
    assert statuses == [200] * 6  # the place is free once the last byte is sent, not later
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    for _ in range(6):  # the official client, no retries: never a 429
        assert sdk.audio.speech.create(model="tts-1", voice="alloy", input="again").content


def test_the_settings_keys_and_unlimited_keys_have_no_limit_headers(server) -> None:
    url, _ = server
    answer = raw_speak(url, make_key(url, "unlimited"))
    assert answer.status_code == 200 and "x-ratelimit-limit-requests" not in answer.headers
    assert raw_speak(url, ADMIN).status_code == 200


def test_a_websocket_sessions_sentences_count_against_its_key(server) -> None:
    url, _ = server
    key = make_key(url, "ws-two", requests_per_minute=2)
    ws_url = url.replace("http://", "ws://") + "/v1/audio/speech/ws"
    outcomes = []
    with connect(ws_url, additional_headers=bearer(key)) as ws:
        ws.send(json.dumps({"type": "config"}))
        assert receive_json(ws)["type"] == "ready"
        for text in ("One.", "Two.", "Three."):
            ws.send(json.dumps({"type": "text", "text": text}))
            ws.send(json.dumps({"type": "flush"}))
            while (message := receive_json(ws))["type"] not in ("segment.done", "error"):
                pass
            outcomes.append(message["type"] if message["type"] != "error" else message["error"]["code"])
    assert outcomes == ["segment.done", "segment.done", "rate_limit_exceeded"]
    rows = httpx.get(f"{url}/v1/usage", headers=bearer(key)).json()["data"]
    assert sum(row["requests"] for row in rows) == 2
    assert sum(row["input_characters"] for row in rows) == len("One.") + len("Two.")


def receive_json(ws) -> dict:
    while isinstance(message := ws.recv(timeout=30), bytes):
        pass
    return json.loads(message)
