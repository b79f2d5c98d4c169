"""The embedded (piper) voice behind the text front end: a WebSocket session fed word by word is heard
as the words it was sent, and a parenthesised aside in a streamed HTTP request is read aloud."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect

from helpers.asr import HEARD_WER, transcribe, word_error_rate
from helpers.audio import pcm_samples
from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

# piper draws fresh noise on every synthesis; the calm style (least noise) is heard most reliably.
VOICE = "onyx"


@pytest.fixture(scope="module")
def embedded_url():
    embedded = pytest.importorskip("polyvox.backends.embedded")
    settings = Settings()
    backend = embedded.EmbeddedBackend()
    app = create_app(settings, backend, build_text_pipeline(settings, backend))
    with running_server(app) as url:
        yield url


def test_words_sent_one_by_one_are_heard_sentence_by_sentence(embedded_url):
    said = "The garden gate was open. Two cats sat on the warm stone wall."
    audio = bytearray()
    texts = []
    with connect(embedded_url.replace("http://", "ws://") + "/v1/audio/speech/ws") as ws:
        ws.send(json.dumps({"type": "config", "voice": VOICE}))
        assert json.loads(ws.recv(timeout=60))["type"] == "ready"
        for word in said.split(" "):
            ws.send(json.dumps({"type": "text", "text": word + " "}))
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            if isinstance(message, bytes):
                audio += message
            elif (event := json.loads(message))["type"] == "segment.start":
                texts.append(event["text"])
            else:
                assert event["type"] in ("segment.done", "done"), event
    assert texts == ["The garden gate was open.", "Two cats sat on the warm stone wall."]
    heard = transcribe(pcm_samples(bytes(audio)), 24000)
    said_words = "the garden gate was open two cats sat on the warm stone wall"
    assert word_error_rate(said_words, heard) <= HEARD_WER, heard


def test_a_parenthesised_aside_in_a_streamed_request_is_read_aloud(embedded_url):
    payload = {
        "input": "(quietly) Good morning, everyone.",
        "voice": VOICE,
        "response_format": "pcm",
        "stream_format": "audio",
    }
    with httpx.stream("POST", f"{embedded_url}/v1/audio/speech", json=payload, timeout=120) as response:
        assert response.status_code == 200
        audio = b"".join(response.iter_raw())
    heard = transcribe(pcm_samples(audio), 24000).lower()
    assert "quiet" in heard and "morning" in heard, heard
