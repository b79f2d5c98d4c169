"""`pitch`: the embedded voice's measured fundamental frequency (librosa's pYIN) moves by 2^(n/12) and
its duration stays within 2 %, on every path (a whole file, a stream, SSE, the WebSocket), with `speed`
too; out of -12..+12 is a 400 naming `pitch`.

piper draws fresh noise for every take, so two takes of one text differ a little in length and
melody: each shifted answer here is compared with the unshifted answer of the same audio, which the
audio cache replays (it keeps the engine's audio, before the pitch shift) — the engine's path (a MISS)
is checked on its own, by its pitch alone."""

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
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

librosa = pytest.importorskip("librosa")
embedded = pytest.importorskip("polyvox.backends.embedded")

TEXT = "The quick brown fox jumps over the lazy dog."
RATE = 24000  # pcm's rate
VOICE = "onyx"  # the calm delivery: the steadiest pitch of the embedded voice
SEMITONE = 2 ** (1 / 12)


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


def f0(samples: np.ndarray) -> np.ndarray:
    """The fundamental frequency of each 512-sample frame (pYIN), NaN where it is not voiced."""
    track, voiced, _ = librosa.pyin(samples, fmin=50, fmax=500, sr=RATE)
    return np.where(voiced, track, np.nan)


@pytest.fixture(scope="module")
def original(client) -> tuple[np.ndarray, np.ndarray]:
    """The text at pitch 0, which the cache then holds (every shifted answer below replays it), and
    its f0 track."""
    samples, cache = whole(client)
    assert cache == "MISS"
    return samples, f0(samples)


def assert_shifted(samples: np.ndarray, original: tuple[np.ndarray, np.ndarray], semitones: float) -> None:
    """The same audio as `original`, as long within 2 %, its f0 frame by frame (where both are voiced)
    2^(n/12) times the original's, within a quarter of a semitone."""
    unshifted, unshifted_f0 = original
    assert samples.size == pytest.approx(unshifted.size, rel=0.02)  # the tempo is unchanged
    shifted_f0 = f0(samples)
    frames = min(shifted_f0.size, unshifted_f0.size)
    ratios = shifted_f0[:frames] / unshifted_f0[:frames]
    ratios = ratios[~np.isnan(ratios)]
    # frames voiced in both: a take at speed 1.5 has as few as 10 voiced frames (80 takes), and pYIN finds
    # fewer voiced after a shift down (8 of 51 in one take at -5), never fewer after one up
    assert ratios.size >= 5
    ratio = float(np.median(ratios))
    assert ratio == pytest.approx(SEMITONE**semitones, rel=SEMITONE**0.25 - 1), ratio


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
    """At speed 1.5 (piper's own, so audio of its own) pitch moves the voice and keeps the length. Up,
    not down: a fast take is short, and pYIN voices few frames of it once shifted down (none in one
    whole-suite run)."""
    faster, cache = whole(client, speed=1.5)
    assert cache == "MISS"
    shifted, cache = whole(client, speed=1.5, pitch=5)
    assert cache == "HIT"
    assert_shifted(shifted, (faster, f0(faster)), 5)


def test_the_engines_own_audio_is_shifted_too(client, original):
    """A take the engine makes for this request (no cache): its own melody and timing, so its median f0
    is compared with the original's, within two semitones: the median f0 of twelve unshifted takes of
    this text spread over 0.8 of a semitone, so two takes can differ by more than one (a shifted take
    in one whole-suite run was 6.35 semitones above the original), and two still tell 5 up from
    unshifted, from 10 up and from 5 down."""
    samples, cache = whole(client, pitch=5, cache=False)
    assert cache == "BYPASS"
    ratio = np.nanmedian(f0(samples)) / np.nanmedian(original[1])
    assert SEMITONE**3 < ratio < SEMITONE**7, ratio


@pytest.mark.parametrize("pitch", [12.5, -13, 100])
def test_a_pitch_out_of_range_is_a_400_naming_it(client, url, pitch):
    with pytest.raises(openai.BadRequestError) as caught:
        whole(client, pitch=pitch)
    assert caught.value.response.json()["error"]["param"] == "pitch"
    with connect(url.replace("http", "ws", 1) + "/v1/audio/speech/ws", open_timeout=30) as ws:
        ws.send(json.dumps({"type": "config", "voice": VOICE, "pitch": pitch}))
        error = json.loads(ws.recv(timeout=60))
    assert error["type"] == "error" and error["error"]["param"] == "pitch"
