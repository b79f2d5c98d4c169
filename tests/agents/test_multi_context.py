"""`/elevenlabs/.../multi-stream-input` and `stream-input` spoken by a raw WebSocket client against the
fake engine (whose running generations the test can see): contexts run side by side on one socket; an
immediate `close_context` ends one at once, its engine work let go before its `isFinal`, while the other
goes on to its end; a graceful one speaks what was sent first; a disconnect or `close_socket` lets go of
everything; the key may come in the first message; bad input gets an error message and the socket goes on."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

RATE = 16000
LONG_A = " ".join(f"Apples number {n} are red." for n in range(12))
LONG_B = " ".join(f"Bananas number {n} are yellow." for n in range(3))
ADMIN = "agents-admin-key"


class Watched(FakeBackend):
    """The fake engine keeping the texts it is generating now; a text starting with `HELD` stops after
    its first chunk (until the test ends), so it is surely still running when it is interrupted. While
    `gate` is cleared, a text starting with `GATED` waits after its first chunk until it is set: so it
    is surely still running when another context ends."""

    HELD = "Apples"
    GATED = "Bananas number 0 "

    def __init__(self):
        super().__init__(sample_rate=RATE, chunk_s=0.05)
        self.generating: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def _waits(self, text: str) -> bool:
        return text.startswith(self.HELD) or (text.startswith(self.GATED) and not self.gate.is_set())

    async def generate(self, request):
        self.generating.append(request.text)
        try:
            async for chunk in super().generate(request):
                yield chunk
                while self._waits(request.text):
                    await asyncio.sleep(0.01)
        finally:
            self.generating.remove(request.text)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    backend = Watched()
    settings = Settings(admin_api_keys=[ADMIN], voices_dir=tmp_path_factory.mktemp("agents-voices"))
    with running_server(create_app(settings, backend)) as url:
        keys = {}
        for scope in ("speech", "voices"):
            made = httpx.post(
                f"{url}/admin/keys",
                json={"name": f"agents-{scope}", "scopes": [scope]},
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
            assert made.status_code == 201, made.text
            keys[scope] = made.json()["key"]
        yield url.replace("http://", "ws://"), backend, keys


def _socket(url: str, key: str | None, path: str = "multi-stream-input", query: str = ""):
    headers = {"xi-api-key": key} if key is not None else {}
    target = f"{url}/elevenlabs/v1/text-to-speech/alloy/{path}?output_format=pcm_{RATE}{query}"
    return connect(target, additional_headers=headers, open_timeout=30)


def _receive(ws) -> dict:
    return json.loads(ws.recv(timeout=60))


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@contextlib.contextmanager
def _opened(gate: threading.Event):
    """Set `gate` when the block ends, however it ends (a failed test leaves no generation waiting)."""
    try:
        yield
    finally:
        gate.set()


def test_an_immediate_close_ends_one_context_at_once_and_the_other_goes_on(served):
    url, backend, keys = served
    audio: dict[str, int] = {"a": 0, "b": 0}
    # B's first sentence waits after its first chunk until A has ended, so B is surely still speaking
    # when A is closed (B's three short sentences could otherwise all be spoken before the close is sent)
    backend.gate.clear()
    with _socket(url, keys["speech"]) as ws, _opened(backend.gate):
        for context, text in (("a", LONG_A), ("b", LONG_B)):
            ws.send(json.dumps({"text": " ", "context_id": context}))
            ws.send(json.dumps({"text": text, "context_id": context, "flush": True}))
        ws.send(json.dumps({"context_id": "b", "close_context": True}))  # graceful: B speaks to its end
        while audio["a"] == 0:
            message = _receive(ws)
            audio[message["contextId"]] += len(base64.b64decode(message.get("audio") or ""))
        assert any(text.startswith("Apples") for text in backend.generating)
        ws.send(json.dumps({"context_id": "a", "close_context": True, "immediate": True}))
        finals = []
        after_a = 0
        while "b" not in finals:
            message = _receive(ws)
            assert "error" not in message, message
            context = message["contextId"]
            if message.get("isFinal"):
                finals.append(context)
                if context == "a":
                    # Its engine work is let go before its isFinal is sent.
                    assert not any(text.startswith("Apples") for text in backend.generating)
                    backend.gate.set()  # B goes on from its first chunk to its end
                continue
            data = len(base64.b64decode(message.get("audio") or ""))
            if "a" in finals:
                assert context == "b", "audio of a context after its isFinal"
            if context == "a":
                after_a += data
            audio[context] += data
    assert finals == ["a", "b"]
    expected_b = sum(len(s) for s in LONG_B.replace(" Bananas", "|Bananas").split("|")) * 0.02
    assert abs(audio["b"] / 2 / RATE - expected_b) < 0.01, "B spoke every sentence to its end"
    assert audio["a"] == after_a + round(0.05 * RATE) * 2, "A's audio stopped at its first chunk"


def test_a_disconnect_lets_go_of_every_contexts_engine_work(served):
    url, backend, keys = served
    with _socket(url, keys["speech"]) as ws:
        ws.send(json.dumps({"text": LONG_A, "context_id": "x", "flush": True}))
        assert "audio" in _receive(ws)
    _wait_until(lambda: not backend.generating, "the engine still generates for a closed socket")


def test_close_socket_ends_everything_and_closes(served):
    url, backend, keys = served
    with _socket(url, keys["speech"]) as ws:
        ws.send(json.dumps({"text": LONG_A, "context_id": "x", "flush": True}))
        assert "audio" in _receive(ws)
        ws.send(json.dumps({"close_socket": True}))
        with pytest.raises(ConnectionClosed):
            while True:
                ws.recv(timeout=60)
        assert ws.close_code == 1000
    _wait_until(lambda: not backend.generating, "the engine still generates after close_socket")


def test_stream_input_takes_its_key_in_the_first_message(served):
    url, _, keys = served
    with _socket(url, None, "stream-input") as ws:
        ws.send(json.dumps({"text": " ", "xi_api_key": keys["speech"]}))
        ws.send(json.dumps({"text": "Hello there. "}))
        ws.send(json.dumps({"text": ""}))  # the end of the input
        total = 0
        while not (message := _receive(ws)).get("isFinal"):
            total += len(base64.b64decode(message["audio"]))
            assert "contextId" not in message
        assert abs(total / 2 / RATE - len("Hello there.") * 0.02) < 0.01


def test_without_a_key_the_first_message_is_refused_and_the_socket_closed(served):
    url, _, keys = served
    with _socket(url, None, "stream-input") as ws:
        ws.send(json.dumps({"text": "Hello. "}))
        refusal = _receive(ws)
        assert refusal["code"] == 401 and refusal["error"] == "invalid_api_key", refusal
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == 1008
    with _socket(url, None, "stream-input") as ws:
        ws.send(json.dumps({"text": " ", "xi_api_key": keys["voices"]}))  # a key without `speech`
        assert _receive(ws)["code"] == 403


def test_a_handshake_with_a_wrong_or_unscoped_key_is_refused(served):
    url, _, keys = served
    for key, status in (("agents-wrong-key", 401), (keys["voices"], 403)):
        with pytest.raises(InvalidStatus) as refused, _socket(url, key):
            pass
        assert refused.value.response.status_code == status


def test_bad_messages_get_an_error_and_the_context_goes_on(served):
    url, _, keys = served
    with _socket(url, keys["speech"]) as ws:
        ws.send("not json")
        assert _receive(ws)["error"] == "invalid_json"
        ws.send(json.dumps({"text": 5, "context_id": "c"}))
        assert _receive(ws)["code"] == 400
        ws.send(json.dumps({"text": "Hello. ", "context_id": "c", "voice_settings": {"speed": 9}}))
        assert _receive(ws)["code"] == 400
        ws.send(json.dumps({"text": "Hello there. ", "context_id": "c", "flush": True}))
        ws.send(json.dumps({"context_id": "c", "close_context": True}))
        while not (message := _receive(ws)).get("isFinal"):
            assert "audio" in message, message


def test_an_output_format_it_cannot_serve_is_refused_at_the_handshake(served):
    url, _, keys = served
    target = f"{url}/elevenlabs/v1/text-to-speech/alloy/stream-input?output_format=alaw_8000"
    with (
        pytest.raises(InvalidStatus) as refused,
        connect(target, additional_headers={"xi-api-key": keys["speech"]}, open_timeout=30),
    ):
        pass
    assert refused.value.response.status_code == 400
    assert b"alaw_8000" in refused.value.response.body


def test_the_http_routes_take_xi_api_key_with_the_speech_scope(served):
    url, _, keys = served
    base = url.replace("ws://", "http://") + "/elevenlabs/v1/text-to-speech/alloy?output_format=pcm_16000"
    for key, status in (("agents-wrong-key", 401), (keys["voices"], 403), (keys["speech"], 200)):
        answer = httpx.post(base, json={"text": "Hello."}, headers={"xi-api-key": key}, timeout=60)
        assert answer.status_code == status, answer.text
    assert len(answer.content) == round(len("Hello.") * 0.02 * RATE) * 2


def _limited_key(url: str, name: str, **limits: int) -> str:
    made = httpx.post(
        f"{url.replace('ws://', 'http://')}/admin/keys",
        json={"name": name, "scopes": ["speech"], "limits": limits},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert made.status_code == 201, made.text
    return made.json()["key"]


def test_an_open_socket_is_one_of_the_keys_streams(served):
    url, _, _ = served
    key = _limited_key(url, "agents-one-stream", max_streams=1)
    speech = url.replace("ws://", "http://") + "/elevenlabs/v1/text-to-speech/alloy?output_format=pcm_16000"
    with _socket(url, key) as ws:
        ws.send(json.dumps({"text": "Hello there. ", "context_id": "c", "flush": True}))
        assert "audio" in _receive(ws)
        busy = httpx.post(speech, json={"text": "Hello."}, headers={"xi-api-key": key}, timeout=60)
        assert busy.status_code == 429, busy.text
    deadline = time.monotonic() + 60
    while (
        answer := httpx.post(speech, json={"text": "Hello."}, headers={"xi-api-key": key})
    ).status_code == 429:
        assert time.monotonic() < deadline, "the closed socket's stream was never given back"
        time.sleep(0.05)
    assert answer.status_code == 200


def test_each_sentence_counts_against_the_keys_characters_per_minute(served):
    url, _, _ = served
    key = _limited_key(url, "agents-few-characters", characters_per_minute=30)
    with _socket(url, key) as ws:
        ws.send(json.dumps({"text": "Twenty characters... ", "context_id": "c"}))
        ws.send(json.dumps({"text": "And twenty more here.", "context_id": "c", "flush": True}))
        messages = []
        while not any("error" in m for m in messages):
            messages.append(_receive(ws))
        refusal = next(m for m in messages if "error" in m)
        assert refusal["code"] == 429 and refusal["contextId"] == "c", refusal


def test_an_unknown_voice_is_refused_when_its_context_opens(served):
    url, _, keys = served
    target = f"{url}/elevenlabs/v1/text-to-speech/agents-nobody/multi-stream-input?output_format=pcm_16000"
    with connect(target, additional_headers={"xi-api-key": keys["speech"]}, open_timeout=30) as ws:
        ws.send(json.dumps({"text": " ", "context_id": "c"}))
        refusal = _receive(ws)
        assert refusal["error"] == "voice_not_found" and refusal["contextId"] == "c", refusal
    http = url.replace("ws://", "http://") + "/elevenlabs/v1/text-to-speech/agents-nobody"
    answer = httpx.post(http, json={"text": "Hello."}, headers={"xi-api-key": keys["speech"]}, timeout=60)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "voice_not_found"


def test_past_five_contexts_the_oldest_closed_one_makes_room(served):
    url, backend, keys = served
    with _socket(url, keys["speech"]) as ws:
        for n in range(5):  # five held contexts, the first two closed by the client
            ws.send(json.dumps({"text": LONG_A, "context_id": f"c{n}", "flush": True}))
        ws.send(json.dumps({"text": ""}))  # a keep-alive naming no context opens none
        for n in range(2):
            ws.send(json.dumps({"context_id": f"c{n}", "close_context": True}))
        ws.send(json.dumps({"text": "Hello there. ", "context_id": "c5", "flush": True}))
        ws.send(json.dumps({"context_id": "c5", "close_context": True}))
        finals = []
        while "c5" not in finals:
            message = _receive(ws)
            assert "error" not in message, message
            if message.get("isFinal"):
                finals.append(message["contextId"])
        assert finals == ["c0", "c5"], "the oldest closed context was stopped, then the new one spoke"
        ws.send(json.dumps({"text": "Hello again. ", "context_id": "c5", "flush": True}))  # a new c5
        ws.send(json.dumps({"text": LONG_A, "context_id": "c6", "flush": True}))  # c1 makes room
        ws.send(json.dumps({"text": LONG_A, "context_id": "c7", "flush": True}))  # none closed: refused
        while (message := _receive(ws)).get("error") is None:
            pass
        assert message["error"] == "too_many_contexts" and message["contextId"] == "c7", message
        ws.send(json.dumps({"context_id": "c2", "close_context": True}))
        ws.send(json.dumps({"text": "More. ", "context_id": "c2"}))
        while (message := _receive(ws)).get("error") is None:
            pass
        assert message["error"] == "context_closed" and message["contextId"] == "c2", message
    _wait_until(lambda: not backend.generating, "the engine still generates for a closed socket")


def test_a_socket_whose_key_does_not_come_is_closed(tmp_path):
    settings = Settings(admin_api_keys=[ADMIN], voices_dir=tmp_path, request_read_timeout_s=0.5)
    with (
        running_server(create_app(settings, FakeBackend())) as url,
        _socket(url.replace("http://", "ws://"), None, "stream-input") as ws,
    ):
        refusal = _receive(ws)  # nothing sent: the key never comes
        assert refusal["code"] == 401, refusal
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=60)
        assert ws.close_code == 1008
