"""The speech WebSocket takes hostile input as `/v1/audio/speech` does: a lone UTF-16 surrogate in a
text message and a message nested past the JSON parser's depth are error messages (the session goes
on), and a config naming an unknown model is refused with `model_not_found`."""

from __future__ import annotations

import json

from websockets.sync.client import ClientConnection, connect

from polyvox.backends.fake import FakeBackend


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/v1/audio/speech/ws"


def receive_json(ws: ClientConnection) -> dict:
    while isinstance(message := ws.recv(timeout=30), bytes):
        pass
    return json.loads(message)


def spoken_after(ws: ClientConnection, text: str) -> dict:
    """The `segment.done` of `text`, sent and flushed: the session still speaks."""
    ws.send(json.dumps({"type": "text", "text": text}))
    ws.send(json.dumps({"type": "flush"}))
    while (message := receive_json(ws))["type"] != "segment.done":
        assert message["type"] == "segment.start", message
    return message


def test_hostile_messages_get_errors_and_the_session_goes_on(serve) -> None:
    url = serve(FakeBackend())
    with connect(ws_url(url)) as ws:
        ws.send(json.dumps({"type": "config"}))
        assert receive_json(ws)["type"] == "ready"

        ws.send(r'{"type": "text", "text": "hi \udc80 there."}')  # valid JSON, not text
        error = receive_json(ws)["error"]
        assert (error["type"], error["param"]) == ("invalid_request_error", "text")

        ws.send("[" * 100_000 + "]" * 100_000)
        assert receive_json(ws)["error"]["code"] == "invalid_json"

        assert spoken_after(ws, "Still speaking.")["audio_seconds"] > 0


def test_a_config_naming_an_unknown_model_is_refused(serve) -> None:
    url = serve(FakeBackend())
    with connect(ws_url(url)) as ws:
        ws.send(json.dumps({"type": "config", "model": "tts-9000"}))
        error = receive_json(ws)["error"]
        assert (error["param"], error["code"]) == ("model", "model_not_found")
        ws.send(json.dumps({"type": "config", "model": "gpt-4o-mini-tts"}))
        assert receive_json(ws)["type"] == "ready"
