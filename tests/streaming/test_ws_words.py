"""`/v1/audio/speech/ws` word events with the embedded voice: a session configured with
`timestamp_granularities: ["word", "segment"]` gets each segment's words (and pieces) in a
`segment.words` event before its `segment.done`, on the session's clock (the second sentence's words
after the first sentence's audio), in order, on the speech of the audio it received; a session that
does not ask gets none."""

from __future__ import annotations

import json

import numpy as np
import pytest
from websockets.sync.client import connect

from helpers.audio import pcm_samples
from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

VOICE = "onyx"
SENTENCES = ["The garden gate was open.", "Two cats sat on the warm stone wall."]


@pytest.fixture(scope="module")
def embedded_url():
    embedded = pytest.importorskip("polyvox.backends.embedded")
    settings = Settings()
    backend = embedded.EmbeddedBackend()
    app = create_app(settings, backend, build_text_pipeline(settings, backend))
    with running_server(app) as url:
        yield url.replace("http://", "ws://") + "/v1/audio/speech/ws"


def _session(url: str, config: dict) -> tuple[bytes, list[dict]]:
    audio = bytearray()
    events = []
    with connect(url) as ws:
        ws.send(json.dumps({"type": "config", "voice": VOICE, **config}))
        assert json.loads(ws.recv(timeout=60))["type"] == "ready"
        ws.send(json.dumps({"type": "text", "text": " ".join(SENTENCES)}))
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            if isinstance(message, bytes):
                audio += message
            else:
                events.append(json.loads(message))
    return bytes(audio), events


def test_each_segments_words_come_before_its_end_on_the_sessions_clock(embedded_url):
    audio, events = _session(embedded_url, {"timestamp_granularities": ["word", "segment"]})
    samples = pcm_samples(audio)
    seconds = samples.size / 24000
    kinds = [event["type"] for event in events]
    assert "error" not in kinds, events
    words_by_segment: dict[int, list[dict]] = {0: [], 1: []}
    pieces = []
    done_at = {}
    for event in events:
        if event["type"] == "segment.words":
            assert event["segment"] not in done_at, "words after their segment.done"
            words_by_segment[event["segment"]] += event["words"]
            pieces += event["pieces"]
        elif event["type"] == "segment.done":
            done_at[event["segment"]] = event["audio_seconds"]
    for index, sentence in enumerate(SENTENCES):
        assert [w["word"] for w in words_by_segment[index]] == sentence.split()
    words = words_by_segment[0] + words_by_segment[1]
    starts = [w["start"] for w in words]
    assert starts == sorted(starts)
    assert all(0 <= w["start"] <= w["end"] <= seconds + 0.01 for w in words)
    # The session's clock: the second segment's words come after the first segment's audio.
    assert words_by_segment[1][0]["start"] >= done_at[0] - 0.01
    assert [p["text"] for p in pieces] == SENTENCES
    assert pieces[1]["start"] >= done_at[0] - 0.01
    for word in words:  # each on sound, not in a pause or past the end
        first = int(word["start"] * 24000)
        span = samples[first : max(int(word["end"] * 24000), first + 1)]
        assert np.sqrt(np.mean(span**2)) > 0.01, word


def test_a_session_that_does_not_ask_gets_no_word_events(embedded_url):
    _, events = _session(embedded_url, {})
    assert "segment.words" not in {event["type"] for event in events}
