"""The ElevenLabs multi-context socket on the tiny random VoxCPM2 engine (its audio is not speech, its
lengths are fixed by the test): an immediate `close_context` stops that context's generation within a
step, letting go of its KV blocks, while another context on the socket speaks to its end; and each
sentence's alignment (from the `aligner`'s words) covers the sentence, ends where its audio does, and
runs on the context's clock with `sync_alignment`."""

from __future__ import annotations

import base64
import json

from websockets.sync.client import connect

from streaming.conftest import LONG_WORD, PATCH_SAMPLES, PATCHES, poll_until

RATE = 24000
SENTENCE_BYTES = PATCHES * PATCH_SAMPLES // 2 * 2  # 48 kHz patches resampled to 24 kHz, 16-bit


def _socket(url: str, query: str = ""):
    base = url.replace("http://", "ws://")
    target = f"{base}/elevenlabs/v1/text-to-speech/alloy/multi-stream-input?output_format=pcm_{RATE}{query}"
    return connect(target, open_timeout=60)


def _receive(ws) -> dict:
    message = json.loads(ws.recv(timeout=300))
    assert "error" not in message, message
    return message


def test_an_immediate_close_stops_the_engine_within_a_step_and_the_other_context_goes_on(server):
    url, backend = server
    stats = backend.inner.stats
    before = stats().patches
    audio = {"a": 0, "b": 0}
    with _socket(url) as ws:
        ws.send(json.dumps({"text": f"One {LONG_WORD} of a sentence.", "context_id": "a", "flush": True}))
        ws.send(json.dumps({"text": "Bananas are yellow.", "context_id": "b", "flush": True}))
        ws.send(json.dumps({"context_id": "b", "close_context": True}))
        while audio["a"] == 0:
            message = _receive(ws)
            audio[message["contextId"]] += len(base64.b64decode(message.get("audio") or ""))
        ws.send(json.dumps({"context_id": "a", "close_context": True, "immediate": True}))
        # b may end before or after a's close is acted on (b is short): wait for both contexts' isFinal
        finals = []
        while not {"a", "b"} <= set(finals):
            message = _receive(ws)
            if message.get("isFinal"):
                finals.append(message["contextId"])
            elif message["contextId"] == "b":
                audio["b"] += len(base64.b64decode(message.get("audio") or ""))
            else:
                assert "a" not in finals, "audio of a context after its isFinal"
        poll_until(lambda: stats().running == 0 and stats().waiting == 0, "the closed context leaves")
        assert stats().kv_blocks_used == 0
    assert stats().patches - before < 300 // 2, "the long sentence stopped early"
    assert abs(audio["b"] - SENTENCE_BYTES) <= 4, "the other context spoke to its end"


def test_each_sentences_alignment_covers_it_and_ends_where_its_audio_does(server):
    url, _ = server
    sentences = ["Apples are red.", "Bananas are yellow."]
    alignments, audio_ms, sentence_ends = [], 0.0, []
    with _socket(url, "&sync_alignment=true") as ws:
        ws.send(json.dumps({"text": " ".join(sentences), "context_id": "c", "flush": True}))
        ws.send(json.dumps({"context_id": "c", "close_context": True}))
        while not (message := _receive(ws)).get("isFinal"):
            audio_ms += len(base64.b64decode(message["audio"])) / 2 / RATE * 1000
            if "alignment" in message:
                alignments.append(message["alignment"])
                sentence_ends.append(audio_ms)
                assert message["normalizedAlignment"] == message["alignment"]
    assert ["".join(a["chars"]) for a in alignments] == [s + " " for s in sentences]
    for index, alignment in enumerate(alignments):
        starts, durations = alignment["charStartTimesMs"], alignment["charDurationsMs"]
        assert starts == sorted(starts) and min(durations) >= 0
        begin = sentence_ends[index - 1] if index else 0.0
        assert starts[0] >= begin - 1, "on the context's clock: after the sentences before it"
        assert abs(starts[-1] + durations[-1] - sentence_ends[index]) <= 1, "ends where its audio does"
