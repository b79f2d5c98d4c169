"""`/v1/audio/speech/ws` with the tiny VoxCPM2 engine: incremental text spoken sentence by sentence,
flush, cancel, errors in OpenAI's shape, auth, and a client that leaves mid-sentence."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from helpers.audio import pcm_samples

from .conftest import LONG_WORD, PATCH_SAMPLES, PATCHES, poll_until, tone_wav

SEGMENT_BYTES = PATCHES * PATCH_SAMPLES  # 16-bit pcm at 24 kHz: PATCHES * 3840 samples * 2 bytes


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/v1/audio/speech/ws"


def receive(ws: ClientConnection) -> dict | bytes:
    message = ws.recv(timeout=120)
    return message if isinstance(message, bytes) else json.loads(message)


def until(ws: ClientConnection, kind: str) -> list[dict | bytes]:
    """Messages up to and including the first JSON message of type `kind`."""
    seen = []
    while True:
        message = receive(ws)
        seen.append(message)
        if isinstance(message, dict) and message["type"] == kind:
            return seen


def configure(ws: ClientConnection, **config) -> dict:
    ws.send(json.dumps({"type": "config", **config}))
    ready = receive(ws)
    assert isinstance(ready, dict) and ready["type"] == "ready", ready
    return ready


def segment(messages: list[dict | bytes]) -> tuple[dict, bytes, dict]:
    """(segment.start, its audio, segment.done) of messages holding exactly one segment."""
    start, *frames, done = messages
    assert start["type"] == "segment.start" and done["type"] == "segment.done"
    assert all(isinstance(frame, bytes) for frame in frames) and frames
    return start, b"".join(frames), done


def test_sentences_are_spoken_as_they_complete_then_flush_and_end(server):
    url, backend = server
    with connect(ws_url(url)) as ws:
        ready = configure(ws, voice="nova", seed=9)
        assert ready["response_format"] == "pcm" and ready["sample_rate"] == 24000

        for delta in ("The tide", " is turning", " now. And the"):
            ws.send(json.dumps({"type": "text", "text": delta}))
        # The first sentence is complete: its audio comes without a flush, before any more text is sent.
        start, first, done = segment(until(ws, "segment.done"))
        assert (start["segment"], start["text"]) == (0, "The tide is turning now.")
        assert len(first) == SEGMENT_BYTES and done["audio_seconds"] == pytest.approx(PATCHES * 0.16)
        assert backend.texts == ["The tide is turning now."]

        ws.send(json.dumps({"type": "text", "text": " boats come home"}))
        ws.send(json.dumps({"type": "flush"}))
        start, second, _ = segment(until(ws, "segment.done"))
        assert (start["segment"], start["text"]) == (1, "And the boats come home")

        ws.send(json.dumps({"type": "end"}))
        final = receive(ws)
        assert final["type"] == "done" and final["segments"] == 2
        assert final["usage"]["input_tokens"] == sum(len(text) for text in backend.texts)
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=30)
    assert ws.close_code == 1000

    # The same sentence and seed over HTTP gives the same audio.
    http = httpx.post(
        f"{url}/v1/audio/speech",
        json={"input": "The tide is turning now.", "voice": "nova", "seed": 9, "response_format": "pcm"},
        timeout=60,
    )
    np.testing.assert_allclose(pcm_samples(first), pcm_samples(http.content), rtol=0, atol=2 / 32768)


def test_audio_as_base64_json_in_another_format(server):
    url, _ = server
    with connect(ws_url(url)) as ws:
        ready = configure(ws, response_format="wav", audio_encoding="base64", speed=2.0)
        assert ready["content_type"] == "audio/wav"
        ws.send(json.dumps({"type": "text", "text": "Base sixty four, please.\n"}))
        start, *audio, done = until(ws, "segment.done")
        assert all(message["type"] == "audio" and message["segment"] == 0 for message in audio)
        wav = b"".join(base64.b64decode(message["audio"]) for message in audio)
        assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
        assert done["audio_seconds"] == pytest.approx(PATCHES * 0.16 / 2.0, abs=0.02)


def test_a_session_can_clone_from_base64_reference_audio(server):
    url, backend = server
    clip = base64.b64encode(tone_wav()).decode()
    with connect(ws_url(url)) as ws:
        ws.send(json.dumps({"type": "config", "ref_audio": "not base64!"}))
        assert receive(ws)["error"]["code"] == "invalid_audio"
        configure(ws, ref_audio=f"data:audio/wav;base64,{clip}", ref_text="A low hum.")
        ws.send(json.dumps({"type": "text", "text": "Spoken in a cloned voice.\n"}))
        _, audio, _ = segment(until(ws, "segment.done"))
    assert len(audio) == SEGMENT_BYTES
    reference = backend.requests[0].reference
    assert reference is not None and reference.transcript == "A low hum."


def test_cancel_stops_the_audio_frees_the_engine_and_the_session_goes_on(server):
    url, backend = server
    stats = backend.inner.stats
    with connect(ws_url(url)) as ws:
        configure(ws)
        ws.send(
            json.dumps({"type": "text", "text": f"A {LONG_WORD} sentence that goes on. Queued next. Half"})
        )
        assert receive(ws)["type"] == "segment.start"
        assert isinstance(receive(ws), bytes)
        ws.send(json.dumps({"type": "cancel"}))
        before_cancel = until(ws, "cancelled")
        assert before_cancel[-1]["segments"] == [0, 1]
        assert all(isinstance(m, bytes) for m in before_cancel[:-1])  # no segment finished or started
        poll_until(lambda: stats().running == 0 and stats().waiting == 0, "the cancelled request leaves")
        assert stats().kv_blocks_used == 0

        ws.send(json.dumps({"type": "text", "text": "After the cancel."}))
        ws.send(json.dumps({"type": "flush"}))
        start, audio, _ = segment(until(ws, "segment.done"))
        assert (start["segment"], start["text"]) == (2, "After the cancel.")  # "Half" was dropped
        assert len(audio) == SEGMENT_BYTES


def test_leaving_mid_sentence_cancels_the_generation_and_frees_its_kv_blocks(server):
    url, backend = server
    stats = backend.inner.stats
    before = stats().patches
    with connect(ws_url(url)) as ws:
        configure(ws)
        ws.send(json.dumps({"type": "text", "text": f"One {LONG_WORD} of a sentence."}))
        ws.send(json.dumps({"type": "flush"}))
        assert receive(ws)["type"] == "segment.start"
        assert isinstance(receive(ws), bytes)
        # the engine's counters are read from this thread while its step loop runs: wait for a reading
        # that shows the request held (its 300 patches take far longer than that)
        held = lambda: stats().running == 1 and stats().kv_blocks_used > 0  # noqa: E731
        poll_until(held, "the engine holds it", seen=stats)
    poll_until(lambda: stats().running == 0 and stats().waiting == 0, "the request leaves the engine")
    assert stats().kv_blocks_used == 0
    assert stats().patches - before < 300 // 2


def test_mistakes_are_answered_in_openais_error_shape_and_the_session_survives(server):
    url, _ = server
    with connect(ws_url(url)) as ws:
        ws.send(json.dumps({"type": "text", "text": "Too early."}))
        error = receive(ws)
        assert error["type"] == "error" and error["error"]["code"] == "config_required"
        assert set(error["error"]) == {"message", "type", "param", "code"}
        ws.send(json.dumps({"type": "config", "voice": "nobody"}))
        assert receive(ws)["error"]["code"] == "voice_not_found"
        ws.send(json.dumps({"type": "config", "speed": 9}))
        assert receive(ws)["error"]["param"] == "speed"
        ws.send("not json")
        assert receive(ws)["error"]["code"] == "invalid_json"
        configure(ws)
        ws.send(json.dumps({"type": "shout"}))
        assert receive(ws)["error"]["param"] == "type"
        ws.send(json.dumps({"type": "text", "text": "Still here."}))
        ws.send(json.dumps({"type": "flush"}))
        _, audio, _ = segment(until(ws, "segment.done"))
        assert len(audio) == SEGMENT_BYTES


def test_needs_an_api_key_when_the_server_has_keys(tiny_server):
    url, _ = tiny_server(api_keys=["sesame"])
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(url))
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    with connect(ws_url(url), additional_headers={"Authorization": "Bearer sesame"}) as ws:
        configure(ws)


def test_a_segment_that_finds_the_server_full_fails_alone_and_the_session_goes_on(tiny_server):
    url, backend = tiny_server(max_concurrent_requests=1, max_queue=0)
    backend.hold = lambda request: "hog" in request.text
    payload = {"input": "The hog holds the only slot.", "response_format": "pcm"}
    with ThreadPoolExecutor(1) as pool:
        hog = pool.submit(httpx.post, f"{url}/v1/audio/speech", json=payload, timeout=120)
        poll_until(lambda: backend.requests, "the hog is generating")
        with connect(ws_url(url)) as ws:
            configure(ws)
            ws.send(json.dumps({"type": "text", "text": "No room for me.\n"}))
            refused = until(ws, "error")[-1]
            assert refused["segment"] == 0 and refused["error"]["code"] == "rate_limit_exceeded"
            backend.release.set()
            assert hog.result().status_code == 200
            ws.send(json.dumps({"type": "text", "text": "Room at last.\n"}))
            start, audio, _ = segment(until(ws, "segment.done"))
            assert (start["segment"], start["text"]) == (1, "Room at last.")
            assert len(audio) == SEGMENT_BYTES
