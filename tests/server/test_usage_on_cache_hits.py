"""`usage.input_tokens` counts the characters spoken as the text front end prepared them, the same
whether the audio came from the engine or from the audio cache: over SSE and the WebSocket, on the
embedded voice behind the front end, as `polyvox serve` runs it, with the cache on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

# Normalisation spells the numbers out: what is spoken is longer than what was sent.
TEXT = "It costs $5 at 3:30 on 2024-01-02."


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    embedded = pytest.importorskip("polyvox.backends.embedded")
    settings = Settings(cache_enabled=True, cache_dir=tmp_path_factory.mktemp("cache"))
    backend = embedded.EmbeddedBackend(max_workers=1)
    app = create_app(settings, backend, build_text_pipeline(settings, backend))
    with running_server(app) as base:
        yield base


def sse_usage(url: str, text: str) -> tuple[str, dict]:
    body = {"input": text, "voice": "nova", "response_format": "pcm", "stream_format": "sse"}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    return response.headers["x-cache"], events[-1]["usage"]


def ws_usage(url: str, text: str) -> dict:
    with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/ws") as ws:
        ws.send(json.dumps({"type": "config", "voice": "nova"}))
        ws.send(json.dumps({"type": "text", "text": text}))
        ws.send(json.dumps({"type": "end"}))
        while not isinstance(message := ws.recv(timeout=120), str) or json.loads(message)["type"] != "done":
            pass
        return json.loads(message)["usage"]


def test_sse_counts_the_same_input_tokens_on_a_miss_and_on_its_hit(url: str) -> None:
    miss_status, miss = sse_usage(url, TEXT)
    hit_status, hit = sse_usage(url, TEXT)
    assert (miss_status, hit_status) == ("MISS", "HIT")
    assert miss["input_tokens"] > len(TEXT)  # the numbers as spoken
    assert hit == miss


def test_a_websocket_session_counts_the_same_input_tokens_on_a_miss_and_on_its_hit(url: str) -> None:
    text = "Room 12 opens at 9:45."
    miss, hit = ws_usage(url, text), ws_usage(url, text)
    assert miss["input_tokens"] > len(text)
    assert hit == miss
