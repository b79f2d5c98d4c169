"""The voice API on the tiny VoxCPM2: an uploaded voice is stored, spoken, listed, kept across a
restart and deleted; a voice added to voices.json by hand is served after a reload; replacing a
voice's clip never serves the old voice's audio from the cache; the embedded engine, which cannot
clone, refuses to store a voice from a clip as it refuses to speak one (422 `cloning_unsupported`,
in the same words), so the playground's "saved" is never followed by a refusal."""

from __future__ import annotations

import json

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode
from voices.clips import flac_clip, wav_clip


def speak(url: str, voice: str, text: str = "Hello there.", seed: int = 7, **extra) -> httpx.Response:
    body = {"model": "voxcpm2", "input": text, "voice": voice, "response_format": "wav", "seed": seed}
    response = httpx.post(f"{url}/v1/audio/speech", json=body | extra, timeout=120)
    assert response.status_code == 200, response.text
    return response


def audio(response: httpx.Response) -> np.ndarray:
    samples, rate = decode(response.content)
    assert rate == 24000 and samples.size > 0 and np.isfinite(samples).all()
    return samples


def upload(url: str, name: str, data: bytes, filename: str = "clip.wav", **fields) -> httpx.Response:
    form = {"name": name, "consent": "true", **fields}
    return httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio": (filename, data)}, timeout=60)


def listed(url: str) -> list[str]:
    return [v["id"] for v in httpx.get(f"{url}/v1/audio/voices").json()["voices"]]


def test_an_uploaded_voice_is_used_listed_survives_a_restart_and_is_deleted(voxcpm_server):
    clip = flac_clip(1.5, pitch=150.0)
    with voxcpm_server() as url:
        created = upload(url, "anna", clip, filename="anna.flac", transcript="A short test clip.")
        assert created.status_code == 201, created.text
        card = created.json()
        assert (card["id"], card["source"], card["transcript"]) == ("anna", "uploaded", "A short test clip.")
        assert card["duration_s"] == pytest.approx(1.5, abs=0.01)
        assert "anna" in listed(url)
        seed_shape = httpx.get(f"{url}/v1/voices").json()
        assert {"id": "anna", "object": "voice", "name": "anna", "source": "uploaded"} in seed_shape["data"]
        first = audio(speak(url, "anna"))
        zero_shot_clone = audio(speak(url, "alloy"))
        assert first.size == zero_shot_clone.size and np.abs(first - zero_shot_clone).max() > 2e-4

    with voxcpm_server() as url:  # a new app and engine on the same voices directory
        assert "anna" in listed(url)
        assert (
            httpx.get(f"{url}/v1/audio/voices/anna").json()["voice_prompt_hash"] == card["voice_prompt_hash"]
        )
        after_restart = audio(speak(url, "anna"))
        np.testing.assert_allclose(after_restart, first, atol=2e-4)

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        via_openai = client.audio.speech.create(
            model="voxcpm2", voice="anna", input="Hello there.", response_format="wav", extra_body={"seed": 7}
        )
        np.testing.assert_allclose(decode(via_openai.content)[0], first, atol=2e-4)

        deleted = httpx.delete(f"{url}/v1/audio/voices/anna")
        assert deleted.json() == {"id": "anna", "object": "audio.voice.deleted", "deleted": True}
        assert "anna" not in listed(url)
        gone = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hi.", "voice": "anna"})
        assert gone.status_code == 400 and gone.json()["error"]["code"] == "voice_not_found"
        assert httpx.delete(f"{url}/v1/audio/voices/anna").status_code == 404

    with voxcpm_server() as url:
        assert "anna" not in listed(url)


def test_a_voice_added_to_voices_json_is_served_after_a_reload(voxcpm_server, tmp_path):
    voices_dir = tmp_path / "voices"
    with voxcpm_server(voices_dir=voices_dir, cache_enabled=True, cache_dir=tmp_path / "cache") as url:
        refused = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hi.", "voice": "bob"})
        assert refused.status_code == 400
        (voices_dir / "bob.wav").write_bytes(wav_clip(1.2, pitch=120.0))
        (voices_dir / "broken.wav").write_bytes(b"not audio at all" * 100)
        registry = {
            "voices": {
                "bob": {"audio": "bob.wav", "transcript": "Bob speaking.", "cfg_value": 3.0},
                "broken": {"audio": "broken.wav"},
                "alloy": {"audio": "bob.wav"},
            }
        }
        (voices_dir / "voices.json").write_text(json.dumps(registry))
        reloaded = httpx.post(f"{url}/admin/reload-voices")
        assert reloaded.status_code == 200
        report = reloaded.json()
        assert report["voices"] == ["bob"]
        assert any("broken" in p for p in report["problems"]) and any(
            "alloy" in p for p in report["problems"]
        )
        bob = httpx.get(f"{url}/v1/audio/voices/bob").json()
        assert (bob["source"], bob["cfg_value"], bob["transcript"]) == ("registered", 3.0, "Bob speaking.")
        assert audio(speak(url, "bob")).size > 0
        # The voice's cfg_value (3.0) replaces the server's default (2.0) when the request has none:
        # the same synthesis as asking for 3.0 (a cache hit), not the one for 2.0.
        assert speak(url, "bob", cfg_value=3.0).headers["x-cache"] == "HIT"
        assert speak(url, "bob", cfg_value=2.0).headers["x-cache"] == "MISS"
        assert httpx.get(f"{url}/v1/audio/voices/alloy").json()["source"] == "builtin"


def test_replacing_a_voice_under_the_same_name_never_serves_the_old_audio(voxcpm_server, tmp_path):
    with voxcpm_server(cache_enabled=True, cache_dir=tmp_path / "cache") as url:
        # (With its transcript the clip also primes the audio decoder, which the tiny random model's
        # output shows clearly; a reference alone changes it only by about one 16-bit step.)
        assert upload(url, "carol", wav_clip(1.5, pitch=110.0), transcript="Carol here.").status_code == 201
        first = speak(url, "carol")
        assert first.headers["x-cache"] == "MISS"
        again = speak(url, "carol")
        assert again.headers["x-cache"] == "HIT" and again.content == first.content

        replaced = upload(url, "carol", wav_clip(1.5, pitch=260.0), transcript="Carol here.")
        assert replaced.status_code == 200
        after = speak(url, "carol")
        assert after.headers["x-cache"] == "MISS"
        assert np.abs(audio(after) - audio(first)).max() > 2e-4
        assert speak(url, "carol").headers["x-cache"] == "HIT"


def test_the_embedded_engine_refuses_a_voice_from_a_clip_in_the_words_it_refuses_to_speak_one(
    serve, tmp_path
):
    embedded = pytest.importorskip("polyvox.backends.embedded")
    # A voice registered by hand before: the embedded engine lists it but cannot speak it.
    (tmp_path / "erin.wav").write_bytes(wav_clip())
    (tmp_path / "voices.json").write_text(json.dumps({"voices": {"erin": {"audio": "erin.wav"}}}))
    url = serve(embedded.EmbeddedBackend(max_workers=1), voices_dir=tmp_path)
    spoken = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hello.", "voice": "erin"})
    assert spoken.status_code == 422
    speaking = spoken.json()["error"]
    assert (speaking["param"], speaking["code"]) == ("voice", "cloning_unsupported")

    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        sdk.audio.voices.create(
            name="dave", consent="true", audio_sample=("dave.wav", wav_clip(), "audio/wav")
        )
    storing = refused.value.body
    assert (storing["param"], storing["code"]) == ("audio_sample", "cloning_unsupported")
    words = "a cloned voice and the embedded engine cannot clone; serve VoxCPM2"
    assert words in storing["message"] and words in speaking["message"]
    assert "dave" not in listed(url) and not (tmp_path / "uploads").exists()
    assert upload(url, "dave", wav_clip()).json()["error"]["code"] == "cloning_unsupported"  # polyvox's field

    one_off = httpx.post(
        f"{url}/v1/audio/speech",
        data={"input": "Hello."},
        files={"custom_voice_file": ("me.wav", wav_clip())},
    )
    assert one_off.status_code == 422
    assert one_off.json()["error"]["code"] == "cloning_unsupported" and "VoxCPM2" in one_off.text
    builtin = httpx.post(
        f"{url}/v1/audio/speech", json={"input": "Hello.", "voice": "nova", "response_format": "wav"}
    )
    assert builtin.status_code == 200 and decode(builtin.content)[0].size > 0
