"""The JSON a voice route answers: OpenAI's `audio.voice` object plus polyvox's fields, the same keys
for a builtin and an uploaded voice, with the display name and type the voice's source gives."""

from __future__ import annotations

import httpx

from polyvox.backends.fake import FakeBackend
from voices.clips import wav_clip

KEYS = {
    "id", "object", "name", "created_at", "type", "prompt", "consent_id", "source", "description",
    "transcript", "duration_s", "voice_prompt_hash", "cfg_value", "inference_timesteps", "emotion", "consent",
    "created",
}  # fmt: skip


def test_builtin_and_uploaded_voices_answer_the_same_shape(serve, tmp_path):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)
    form = {
        "name": "Erin's voice",
        "consent": "true",
        "transcript": "A test clip.",
        "cfg_value": "2.5",
        "emotion": "sad",
    }
    created = httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio": ("clip.wav", wav_clip())})
    assert created.status_code == 201, created.text
    uploaded = created.json()
    assert set(uploaded) == KEYS
    assert uploaded["object"] == "audio.voice" and uploaded["type"] == "audio_sample"
    assert uploaded["name"] == "Erin's voice" and uploaded["id"] != uploaded["name"]  # a label, its own id
    assert (uploaded["transcript"], uploaded["cfg_value"], uploaded["consent"]) == ("A test clip.", 2.5, True)
    assert uploaded["emotion"] == "sad"  # the voice's default emotion
    assert isinstance(uploaded["created_at"], int) and uploaded["created_at"] == int(uploaded["created"])
    assert httpx.get(f"{url}/v1/audio/voices/{uploaded['id']}").json() == uploaded

    builtin = httpx.get(f"{url}/v1/audio/voices/nova").json()
    assert set(builtin) == KEYS
    assert (builtin["name"], builtin["source"]) == ("Nova", "builtin")
    # OpenAI's Voice object: an integer created_at and a type of its enum (this engine clones, not designs)
    assert builtin["type"] == "audio_sample" and isinstance(builtin["created_at"], int)
    cards = {card["id"]: card["name"] for card in httpx.get(f"{url}/v1/voices").json()["data"]}
    assert cards["nova"] == "Nova" and cards[uploaded["id"]] == "Erin's voice"
