"""A voice is refused at upload when its transcript could never be spoken with, not stored to fail
every request after: past `max_input_chars` (as a one-off clone's `ref_text`), or too long for the
served model's prompt (the tiny VoxCPM2 takes 512 positions), which the engine says, with its limit.
Through the official `openai` client on a real loopback server."""

from __future__ import annotations

import httpx
import openai
import pytest

from voices.clips import wav_clip


def create(url: str, name: str, transcript: str):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    return client.audio.voices.create(
        name=name,
        consent="true",
        audio_sample=("clip.wav", wav_clip(1.5, pitch=150.0), "audio/wav"),
        extra_body={"transcript": transcript},
    )


def stored(url: str) -> list[str]:
    return [voice["id"] for voice in httpx.get(f"{url}/v1/audio/voices").json()["voices"]]


def test_a_transcript_past_max_input_chars_is_refused_naming_the_limit(voxcpm_server):
    with voxcpm_server() as url:
        with pytest.raises(openai.BadRequestError) as refused:
            create(url, "chatty", "word " * 2000)  # 10,000 characters
        error = refused.value.body
        assert (error["param"], error["code"]) == ("transcript", "transcript_too_long")
        assert "10000 characters; the limit is 4096" in error["message"]
        assert "chatty" not in stored(url)


def test_a_transcript_too_long_for_the_models_prompt_is_refused_with_the_models_limit(voxcpm_server):
    with voxcpm_server() as url:
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            create(url, "wordy", "word " * 600)  # 3,000 characters: within max_input_chars
        error = refused.value.body
        assert (error["param"], error["code"]) == ("transcript", "voice_too_long")
        assert "this model can use 512" in error["message"] and "shorten the transcript" in error["message"]
        assert "wordy" not in stored(url)

        fits = create(url, "brief", "A short test clip.")  # what fits is stored and speaks
        spoken = httpx.post(
            f"{url}/v1/audio/speech",
            json={"input": "Hello there.", "voice": fits.id, "response_format": "wav"},
        )
        assert spoken.status_code == 200, spoken.text
