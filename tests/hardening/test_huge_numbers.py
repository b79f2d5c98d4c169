"""A JSON integer longer than Python's 4,300-digit limit (`"seed": 999…`) is a 400 `invalid_json` in
OpenAI's shape on every route that reads a JSON body, over a keep-alive connection that stays open and
serves the next request; on the speech WebSocket it is an `invalid_json` error message and the session
goes on speaking. No traceback is logged."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from websockets.sync.client import connect

from polyvox.backends.fake import FakeBackend

HUGE = "9" * 5000
SPEECH = '{"input": "Hello.", "voice": "alloy", "seed": ' + HUGE + "}"
VOICE = '{"type": "prompt", "name": "huge", "prompt": "a calm voice", "seed": ' + HUGE + "}"
ROUTES = [
    ("/v1/audio/speech", SPEECH),
    ("/v1/audio/speech/stream", SPEECH),
    ("/v1/audio/voices", VOICE),
    ("/v1/audio/voices/alloy", VOICE),
]


@pytest.mark.parametrize(("path", "body"), ROUTES)
def test_a_number_past_the_parsers_digits_is_a_400_and_the_connection_goes_on(
    serve, caplog, path: str, body: str
) -> None:
    url = serve(FakeBackend())
    with caplog.at_level(logging.INFO), httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_json")
        assert "4300 digits" in error["message"]
        assert response.headers.get("connection") != "close"
        again = client.post("/v1/audio/speech", json={"input": "Still here.", "response_format": "wav"})
        assert again.status_code == 200 and again.content.startswith(b"RIFF")
    assert not [record for record in caplog.records if record.exc_info or record.levelno >= logging.ERROR]


def test_a_websocket_message_with_such_a_number_is_an_error_and_the_session_goes_on(serve, caplog) -> None:
    url = serve(FakeBackend()).replace("http://", "ws://") + "/v1/audio/speech/ws"
    with caplog.at_level(logging.INFO), connect(url) as ws:
        ws.send('{"type": "config", "seed": ' + HUGE + "}")
        error = json.loads(ws.recv(timeout=30))
        assert error["type"] == "error" and error["error"]["code"] == "invalid_json", error
        ws.send(json.dumps({"type": "config"}))
        assert json.loads(ws.recv(timeout=30))["type"] == "ready"
        ws.send(json.dumps({"type": "text", "text": "Still speaking."}))
        ws.send(json.dumps({"type": "flush"}))
        messages = iter(lambda: ws.recv(timeout=30), None)
        assert any(not isinstance(m, bytes) and json.loads(m)["type"] == "segment.done" for m in messages)
    assert not [record for record in caplog.records if record.exc_info or record.levelno >= logging.ERROR]
