"""`polyvox serve --random-weights tiny --arch voxcpm1.5` (the command, as a child process) answers the
OpenAI routes at VoxCPM 1.5's own 44.1 kHz through the batching engine, names the model truly, continues
a transcribed clip, and refuses the modes VoxCPM 1.5 lacks (a clip alone, voice design, an emotion but
neutral) with a 422 naming it; its engine's log line names the release."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode
from helpers.clips import wav_bytes
from helpers.serve_process import polyvox_serve

RATE = 44100
PATCH_S = 4 * 1764 / RATE  # 160 ms: a patch of 4 latent frames of 1,764 samples


def test_voxcpm1_5_random_weights_serve_the_openai_routes_at_44_1_khz(tmp_path):
    flags = (
        "--random-weights", "tiny", "--arch", "voxcpm1.5", "--device", "cpu", "--default-sample-rate",
        "native", "--no-cache-enabled", "--voices-dir", str(tmp_path / "voices"), "--log-level", "info",
    )  # fmt: skip
    with polyvox_serve(*flags) as (proc, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
        models = {m.id for m in client.models.list().data}
        assert {"voxcpm1.5-random-tiny", "voxcpm1.5"} <= models and not any("voxcpm2" in m for m in models)

        speech = client.audio.speech.create(
            model="voxcpm1.5",
            voice="alloy",
            input="Hello there.",
            response_format="wav",
            extra_body={"seed": 1},
        )
        samples, rate = decode(speech.content)
        assert rate == RATE and samples.size >= 3 * PATCH_S * RATE - 1  # the stop head waits min_len
        assert np.isfinite(samples).all() and np.abs(samples).max() > 0

        with client.audio.speech.with_streaming_response.create(
            model="voxcpm1.5", voice="nova", input="Streamed.", response_format="pcm"
        ) as streamed:
            assert len(b"".join(streamed.iter_bytes())) > 0  # pcm stays at 24 kHz by contract

        t = np.arange(2 * RATE) / RATE
        clip = base64.b64encode(wav_bytes(0.3 * np.sin(2 * np.pi * 180 * t), RATE)).decode()
        speech_url = f"{url}/v1/audio/speech"
        cloned = httpx.post(
            speech_url,
            json={"input": "Go on.", "response_format": "wav", "ref_audio": clip, "ref_text": "A test clip."},
            timeout=300,
        )
        assert cloned.status_code == 200, cloned.text
        assert decode(cloned.content)[1] == RATE

        untranscribed = httpx.post(speech_url, json={"input": "No.", "ref_audio": clip}, timeout=60)
        designed = httpx.post(speech_url, json={"input": "No.", "instructions": "A deep voice."}, timeout=60)
        # no voice design, so no emotion but its voices' one delivery (neutral)
        happy = httpx.post(speech_url, json={"input": "No.", "emotion": "happy"}, timeout=60)
        neutral = client.audio.speech.create(
            model="voxcpm1.5",
            voice="alloy",
            input="Yes.",
            response_format="wav",
            extra_body={"emotion": "neutral"},
        )
        assert decode(neutral.content)[0].size > 0
        with pytest.raises(openai.UnprocessableEntityError) as prompt_voice:
            client.audio.voices.create(name="narrator", type="prompt", prompt="A warm, friendly voice")
        assert proc.poll() is None  # still serving
    assert "voxcpm1.5 engine: " in proc.stdout.read()  # the engine process's log names the release
    refused = (
        (untranscribed, "cloning_unsupported", "ref_text"),
        (designed, "voice_design_unsupported", "instructions"),
        (happy, "voice_design_unsupported", "emotion"),
    )
    for response, code, param in refused:
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == code and error["param"] == param and "voxcpm1.5" in error["message"]
    error = prompt_voice.value.body
    assert (
        error["code"] == "voice_design_unsupported" and "voxcpm1.5 engine cannot design" in error["message"]
    )
