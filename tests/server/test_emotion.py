"""`emotion` (neutral, happy, angry, sad): on VoxCPM2 a style in the voice-design description, so each
changes what the same seed speaks, for builtin, registered and one-off cloned voices alike; a voice's
default comes from voices.json; each is its own audio cache entry; an unknown one is a 400 naming
`emotion`; engines without voice design speak `neutral` only and say so with a 422 naming themselves.

Served by a tiny random-weight VoxCPM2 on loopback (at a fixed length: random weights stop anywhere),
asked through the official `openai` client (`extra_body`) and the WebSocket route."""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx
import numpy as np
import openai
import pytest
from websockets.sync.client import connect

from helpers.audio import decode
from helpers.backends import BackendWrapper
from helpers.clips import wav_bytes
from helpers.official import import_voxcpm
from helpers.server import running_server
from polyvox.backends.base import SynthesisRequest
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

EMOTIONS = ("neutral", "happy", "angry", "sad")
PATCHES = 3
RATE = 16000  # the tiny model's reference rate is what a clip is decoded to; any rate is accepted


class FixedLength(BackendWrapper):
    """The real VoxCPM2 engine, every generation PATCHES long, keeping each one's float32 audio (the
    tiny model's differences can be smaller than a 16-bit step of the encoded answer)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.spoken: list[np.ndarray] = []

    async def speak(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        forced = replace(request, min_patches=PATCHES, max_patches=PATCHES)
        parts = []
        async with contextlib.aclosing(self.inner.generate(forced)) as chunks:
            async for chunk in chunks:
                parts.append(np.array(chunk, dtype=np.float32))
                yield chunk
        self.spoken.append(np.concatenate(parts))


def _clip(frequency: float) -> bytes:
    t = np.arange(2 * RATE) / RATE
    return wav_bytes(0.3 * np.sin(2 * np.pi * frequency * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t)), RATE)


@pytest.fixture(scope="module")
def tiny_model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def engine(tiny_model) -> FixedLength:
    return FixedLength(VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=256)))


@pytest.fixture(scope="module")
def url(tmp_path_factory, engine) -> Iterator[str]:
    """A tiny VoxCPM2 server with the audio cache on and two registered voices of one clip, one of
    them happy by default."""
    voices = tmp_path_factory.mktemp("voices")
    (voices / "clip.wav").write_bytes(_clip(180))
    (voices / "voices.json").write_text(
        json.dumps(
            {
                "voices": {
                    "narrator": {"audio": "clip.wav", "transcript": "A test clip."},
                    "cheery": {"audio": "clip.wav", "transcript": "A test clip.", "emotion": "happy"},
                }
            }
        )
    )
    settings = Settings(
        request_timeout_s=600,
        voices_dir=voices,
        cache_enabled=True,
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    with running_server(create_app(settings, engine, build_text_pipeline(settings, engine))) as served:
        yield served


@pytest.fixture(scope="module")
def client(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)


def speak(client: openai.OpenAI, text: str = "Hello there.", **extra) -> tuple[np.ndarray, str]:
    """The decoded audio of a whole WAV answer and its X-Cache."""
    extra.setdefault("seed", 7)
    raw = client.audio.speech.with_raw_response.create(
        model="tts-1",
        voice=extra.pop("voice", "narrator"),
        input=text,
        response_format="wav",
        extra_body={"stream": False, **extra},
    )
    samples, _ = decode(raw.content)
    return samples, raw.headers["x-cache"]


def _all_distinct(takes: dict[str | None, np.ndarray]) -> None:
    names = list(takes)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            same = takes[a].shape == takes[b].shape and np.array_equal(takes[a], takes[b])
            assert not same, f"emotion {a!r} and {b!r} spoke the same audio"


@pytest.mark.parametrize(
    "voice",
    [{"voice": "narrator"}, {"voice": "alloy"}, {"ref_audio": base64.b64encode(_clip(220)).decode()}],
    ids=["registered", "builtin", "one-off clone"],
)
def test_each_emotion_changes_what_the_same_seed_speaks(client, engine, voice):
    """Same seed, same text, same voice: the model's audio differs by emotion alone (and not at all
    between two takes of one emotion, so the differences are the emotion's)."""

    def take(**emotion) -> np.ndarray:
        answered = speak(client, cache=False, **voice, **emotion)[0]
        assert answered.size > 0 and np.abs(answered).max() > 0
        return engine.spoken[-1]

    take(emotion="sad")  # the voice's prompt in the engine's prefix cache, as for every take after it
    takes: dict[str | None, np.ndarray] = {emotion: take(emotion=emotion) for emotion in EMOTIONS}
    takes[None] = take()
    _all_distinct(takes)
    assert np.array_equal(take(emotion="sad"), takes["sad"])


def test_the_emotion_rides_in_the_official_voice_design_form(engine):
    """The prompt is the one the official code builds for `voxcpm design|clone --control DESCRIPTION`
    (`build_final_text`: "(DESCRIPTION)text"), the description being `instructions`, a comma, and the
    emotion's style."""
    import_voxcpm()  # the official package, importable without torchaudio
    official = importlib.import_module("voxcpm.cli")
    voxcpm2 = engine.inner
    text = "Hello there."
    cases = {
        "happy, cheerful tone": SynthesisRequest(text=text, emotion="happy"),
        "a calm, low voice, sad, sorrowful tone": SynthesisRequest(
            text=text, instructions="a calm, low voice.", emotion="sad"
        ),
    }
    for description, request in cases.items():
        expected = voxcpm2._prompt(SynthesisRequest(text=official.build_final_text(text, description)))
        assert voxcpm2._prompt(request).tokens.tolist() == expected.tokens.tolist()


def test_emotion_combines_with_instructions(client, engine):
    """`instructions` and `emotion` together speak neither as the instructions alone nor as the
    emotion alone."""
    text = "Combined."
    takes: dict[str | None, np.ndarray] = {}
    for name, fields in {
        "instructions": {"instructions": "a calm, low voice"},
        "emotion": {"emotion": "angry"},
        "both": {"instructions": "a calm, low voice", "emotion": "angry"},
    }.items():
        speak(client, text, cache=False, **fields)
        takes[name] = engine.spoken[-1]
    _all_distinct(takes)


def test_each_emotion_is_its_own_cache_entry(client):
    text = "Cached by emotion."
    statuses = [speak(client, text, emotion=emotion)[1] for emotion in EMOTIONS]
    assert statuses == ["MISS"] * 4
    assert speak(client, text)[1] == "MISS"  # no emotion is not any of them
    for emotion in EMOTIONS:
        assert speak(client, text, emotion=emotion)[1] == "HIT"


def test_a_voice_speaks_with_its_default_emotion_unless_the_request_names_one(client, url):
    """`cheery` is `narrator`'s clip with `"emotion": "happy"` in voices.json."""
    text = "By default."
    assert np.array_equal(speak(client, text, voice="cheery")[0], speak(client, text, emotion="happy")[0])
    assert np.array_equal(
        speak(client, text, voice="cheery", emotion="sad")[0], speak(client, text, emotion="sad")[0]
    )
    assert httpx.get(f"{url}/v1/audio/voices/cheery").json()["emotion"] == "happy"
    assert httpx.get(f"{url}/v1/audio/voices/narrator").json()["emotion"] is None


@pytest.mark.parametrize("emotion", ["joyful", "HAPPY!", 3])
def test_an_unknown_emotion_is_a_400_naming_it(client, emotion):
    with pytest.raises(openai.BadRequestError) as caught:
        speak(client, emotion=emotion)
    error = caught.value.response.json()["error"]
    assert caught.value.status_code == 400 and error["param"] == "emotion"
    assert "happy" in error["message"]  # says which are accepted


def test_emotion_is_taken_case_and_space_insensitively_in_a_form(url):
    """A multipart form's `emotion` is the same field as JSON's."""
    form = {"input": "Hello there.", "voice": "narrator", "response_format": "wav", "seed": "7"}
    as_form = httpx.post(
        f"{url}/v1/audio/speech", data={**form, "emotion": " Happy ", "stream": "false"}, timeout=300
    )
    assert as_form.status_code == 200, as_form.text
    as_json = httpx.post(
        f"{url}/v1/audio/speech", json={**form, "seed": 7, "emotion": "happy", "stream": False}, timeout=300
    )
    assert np.array_equal(decode(as_form.content)[0], decode(as_json.content)[0])


def test_the_websocket_session_takes_an_emotion_and_refuses_an_unknown_one(url):
    ws_url = url.replace("http", "ws", 1) + "/v1/audio/speech/ws"

    def session_audio(emotion: str) -> bytes:
        with connect(ws_url, open_timeout=30) as ws:
            config = {"type": "config", "voice": "narrator", "seed": 7, "emotion": emotion, "cache": False}
            ws.send(json.dumps(config))
            assert json.loads(ws.recv(timeout=300))["type"] == "ready"
            ws.send(json.dumps({"type": "text", "text": "Hello there."}))
            ws.send(json.dumps({"type": "end"}))
            audio = b""
            while True:
                message = ws.recv(timeout=300)
                if isinstance(message, bytes):
                    audio += message
                elif json.loads(message)["type"] == "done":
                    return audio

    assert session_audio("happy") != session_audio("sad")
    with connect(ws_url, open_timeout=30) as ws:
        ws.send(json.dumps({"type": "config", "voice": "narrator", "emotion": "bored"}))
        error = json.loads(ws.recv(timeout=60))
    assert error["type"] == "error" and error["error"]["param"] == "emotion"


def test_the_audio_models_list_says_which_emotions_voxcpm2_speaks(url):
    models = httpx.get(f"{url}/v1/audio/models").json()["models"]
    assert models and all(model["emotions"] == list(EMOTIONS) for model in models)


def test_the_embedded_voice_speaks_neutral_and_refuses_the_others_naming_itself(embedded_url):
    client = openai.OpenAI(base_url=f"{embedded_url}/v1", api_key="unused", max_retries=0, timeout=120)
    neutral = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav", extra_body={"emotion": "neutral"}
    )
    assert decode(neutral.content)[0].size > 0
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hello.", extra_body={"emotion": "happy"}
        )
    error = caught.value.response.json()["error"]
    assert error["param"] == "emotion" and error["code"] == "voice_design_unsupported"
    assert "embedded" in error["message"]
    models = httpx.get(f"{embedded_url}/v1/audio/models").json()["models"]
    assert all(model["emotions"] == ["neutral"] for model in models)
