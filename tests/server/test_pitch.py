"""`pitch`: the embedded voice moves up or down by n semitones (its spectrum, measured on a log-frequency
axis: tests/helpers/pitch.py) and its duration stays within 2 %, on every path (a whole file, a stream,
SSE, the WebSocket), with `speed` too; out of -12..+12 is a 400 naming `pitch`.

piper draws fresh noise for every take, so two takes of one text differ a little in length and
melody: each shifted answer here is compared with the unshifted answer of the same audio, which the
audio cache replays (it keeps the engine's audio, before the pitch shift) — the engine's path (a MISS)
is checked against another take."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import numpy as np
import openai
import pytest
from websockets.sync.client import connect

from helpers.audio import pcm_samples
from helpers.pitch import shift_semitones
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

librosa = pytest.importorskip("librosa")
embedded = pytest.importorskip("polyvox.backends.embedded")

TEXT = "The quick brown fox jumps over the lazy dog."
RATE = 24000  # pcm's rate
VOICE = "onyx"  # the calm delivery: the steadiest pitch of the embedded voice


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    settings = Settings(cache_enabled=True, cache_dir=tmp_path_factory.mktemp("cache"))
    with running_server(create_app(settings, embedded.EmbeddedBackend())) as served:
        yield served


@pytest.fixture(scope="module")
def client(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)


def whole(client: openai.OpenAI, **extra) -> tuple[np.ndarray, str]:
    """A whole pcm answer's samples and its X-Cache."""
    raw = client.audio.speech.with_raw_response.create(
        model="tts-1", voice=VOICE, input=TEXT, response_format="pcm", extra_body={"stream": False, **extra}
    )
    return pcm_samples(raw.content), raw.headers["x-cache"]


def streamed(client: openai.OpenAI, **extra) -> np.ndarray:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=VOICE, input=TEXT, response_format="pcm", extra_body=extra
    ) as answer:
        assert answer.headers["x-cache"] == "HIT"
        return pcm_samples(b"".join(answer.iter_bytes()))


def sse(url: str, **extra) -> np.ndarray:
    body = {"input": TEXT, "voice": VOICE, "response_format": "pcm", "stream_format": "sse", **extra}
    audio = b""
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=120) as answer:
        assert answer.headers["x-cache"] == "HIT"
        for line in answer.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "speech.audio.delta":
                    audio += base64.b64decode(event["audio"])
    return pcm_samples(audio)


def websocket(url: str, **config) -> np.ndarray:
    with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/ws", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "config", "voice": VOICE, **config}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready" and ready["sample_rate"] == RATE, ready
        ws.send(json.dumps({"type": "text", "text": TEXT}))
        ws.send(json.dumps({"type": "end"}))
        audio = b""
        while True:
            message = ws.recv(timeout=120)
            if isinstance(message, bytes):
                audio += message
            elif json.loads(message)["type"] == "done":
                return pcm_samples(audio)


@pytest.fixture(scope="module")
def original(client) -> np.ndarray:
    """The text at pitch 0, which the cache then holds (every shifted answer below replays it)."""
    samples, cache = whole(client)
    assert cache == "MISS"
    return samples


def assert_shifted(samples: np.ndarray, unshifted: np.ndarray, semitones: float) -> None:
    """The same audio as `unshifted`, as long within 2 %, moved by `semitones` within 0.4 of one (one
    take shifted by 5 either way measures within 0.23 of it: tests/helpers/pitch.py)."""
    assert samples.size == pytest.approx(unshifted.size, rel=0.02)  # the tempo is unchanged
    moved = shift_semitones(samples, unshifted, RATE)
    assert moved == pytest.approx(semitones, abs=0.4), moved


@pytest.mark.parametrize("semitones", [-5, 5])
def test_a_whole_answer_moves_by_the_semitones_at_the_same_length(client, original, semitones):
    samples, cache = whole(client, pitch=semitones)
    assert cache == "HIT"  # the same audio as `original`, shifted
    assert_shifted(samples, original, semitones)


def test_a_streamed_answer_is_shifted(client, original):
    assert_shifted(streamed(client, pitch=5), original, 5)


def test_an_sse_answer_is_shifted(url, original):
    assert_shifted(sse(url, pitch=-5), original, -5)


def test_a_websocket_session_is_shifted(url, original):
    """A session's sentence is the same request: the cache replays it too."""
    assert_shifted(websocket(url, pitch=5), original, 5)


def test_pitch_combines_with_speed(client):
    """At speed 1.5 (piper's own, so audio of its own) pitch moves the voice and keeps the length."""
    faster, cache = whole(client, speed=1.5)
    assert cache == "MISS"
    shifted, cache = whole(client, speed=1.5, pitch=5)
    assert cache == "HIT"
    assert_shifted(shifted, faster, 5)


def test_the_engines_own_audio_is_shifted_too(client, original):
    """A take the engine makes for this request (no cache): its own melody and timing, so it is compared
    with the original, another take, within one semitone (two takes of this text measure within 0.25 of
    their shift: tests/helpers/pitch.py), which still tells 5 up from 4 or 6 up and from unshifted."""
    samples, cache = whole(client, pitch=5, cache=False)
    assert cache == "BYPASS"
    moved = shift_semitones(samples, original, RATE)
    assert 4 < moved < 6, moved


@pytest.mark.parametrize("pitch", [12.5, -13, 100])
def test_a_pitch_out_of_range_is_a_400_naming_it(client, url, pitch):
    with pytest.raises(openai.BadRequestError) as caught:
        whole(client, pitch=pitch)
    assert caught.value.response.json()["error"]["param"] == "pitch"
    with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/ws", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "config", "voice": VOICE, "pitch": pitch}))
        error = json.loads(ws.recv(timeout=60))
    assert error["type"] == "error" and error["error"]["param"] == "pitch"
