"""Renaming a voice (`POST /v1/audio/voices/{id}` with a new `name`) on the tiny VoxCPM2: the display
name changes and survives a restart, while the id, clip and prompt hash stay and the voice still
speaks by its id; builtin and unknown voices, bad names and non-admin keys are refused in OpenAI's
error shape."""

from __future__ import annotations

import json

import httpx
import numpy as np

from voices.clips import wav_clip
from voices.test_voice_api import audio, speak, upload

ADMIN = {"Authorization": "Bearer admin"}
USER = {"Authorization": "Bearer user"}


def rename(url: str, voice_id: str, body: object, headers: dict[str, str] = ADMIN) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/voices/{voice_id}", json=body, headers=headers, timeout=60)


def error_of(response: httpx.Response) -> dict:
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_a_renamed_voice_keeps_its_id_clip_and_audio_and_the_name_survives_a_restart(voxcpm_server, tmp_path):
    keys = {"api_keys": ["user"], "admin_api_keys": ["admin"]}
    with voxcpm_server(**keys) as url:
        created = httpx.post(
            f"{url}/v1/audio/voices",
            data={"name": "My first voice", "consent": "true"},
            files={"audio": ("clip.wav", wav_clip(1.5, pitch=140.0))},
            headers=ADMIN,
            timeout=60,
        )
        assert created.status_code == 201, created.text
        before = created.json()
        voice_id = before["id"]
        assert voice_id.startswith("voice_") and before["name"] == "My first voice"
        first = audio(speak_as(url, voice_id))

        renamed = rename(url, voice_id, {"name": "  Narrator (calm)  "})
        assert renamed.status_code == 200, renamed.text
        after = renamed.json()
        assert after["name"] == "Narrator (calm)"
        unchanged = {k: v for k, v in before.items() if k != "name"}
        assert {k: after[k] for k in unchanged} == unchanged  # id, clip, hash, source, created
        shown = httpx.get(f"{url}/v1/audio/voices/{voice_id}", headers=USER).json()
        assert shown == after
        listed = httpx.get(f"{url}/v1/audio/voices", headers=USER).json()["voices"]
        assert {"id": voice_id, "name": "Narrator (calm)"} in listed
        np.testing.assert_allclose(audio(speak_as(url, voice_id)), first, atol=2e-4)

        denied = rename(url, voice_id, {"name": "Sneaky"}, headers=USER)
        assert denied.status_code == 403 and error_of(denied)["code"] == "admin_key_required"
        builtin = rename(url, "alloy", {"name": "Not alloy"})
        assert builtin.status_code == 409 and "builtin" in error_of(builtin)["message"]
        unknown = rename(url, "voice_0000000000000000", {"name": "Ghost"})
        assert unknown.status_code == 404 and error_of(unknown)["code"] == "voice_not_found"
        for bad in ({"name": "   "}, {"name": "x" * 300}, {"name": "bell\x07"}, {"name": 5}, {}):
            refused = rename(url, voice_id, bad)
            assert refused.status_code == 400, (bad, refused.text)
            assert error_of(refused)["param"] == "name"
        assert (
            httpx.get(f"{url}/v1/audio/voices/{voice_id}", headers=USER).json()["name"] == "Narrator (calm)"
        )

    registry = json.loads((tmp_path / "voices" / "voices.json").read_text())
    assert registry["voices"][voice_id]["label"] == "Narrator (calm)"
    with voxcpm_server(**keys) as url:  # a restart reads the name back from voices.json
        again = httpx.get(f"{url}/v1/audio/voices/{voice_id}", headers=USER).json()
        assert again == after
        np.testing.assert_allclose(audio(speak_as(url, voice_id)), first, atol=2e-4)


def test_a_voice_whose_id_is_its_name_can_be_renamed_and_back(voxcpm_server):
    with voxcpm_server() as url:
        assert upload(url, "anna", wav_clip(1.5, pitch=150.0)).status_code == 201
        renamed = httpx.post(f"{url}/v1/audio/voices/anna", json={"name": "Anna K."}, timeout=60)
        assert renamed.status_code == 200 and renamed.json()["id"] == "anna"
        assert renamed.json()["name"] == "Anna K."
        back = httpx.post(f"{url}/v1/audio/voices/anna", data={"name": "anna"}, timeout=60)  # a form too
        assert back.status_code == 200 and back.json()["name"] == "anna"
        audio(speak(url, "anna"))


def speak_as(url: str, voice: str) -> httpx.Response:
    body = {"model": "voxcpm2", "input": "Hello there.", "voice": voice, "response_format": "wav", "seed": 7}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, headers=USER, timeout=120)
    assert response.status_code == 200, response.text
    return response
