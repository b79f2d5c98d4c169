"""OpenAI's custom-voice flow through the `openai` SDK itself, unchanged, on a real loopback server:
a consent recording, a voice from an audio sample citing it, speech with `voice={"id": ...}`, and a
voice from a text prompt, designed by the tiny VoxCPM2 once and frozen exactly as a builtin voice is.
The embedded voice refuses a prompt voice with a 422 naming VoxCPM2."""

from __future__ import annotations

import re
import time
import wave

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode
from polyvox.voices.builtin import load_builtin_voices
from voices.clips import data_url, wav_clip


def wav_samples(path) -> np.ndarray:
    """A 16-bit PCM WAV file's samples, as integers."""
    with wave.open(str(path)) as wav:
        assert wav.getsampwidth() == 2
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.int32)


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def speak(sdk: openai.OpenAI, voice: str | dict, seed: int = 7, **extra) -> np.ndarray:
    audio = sdk.audio.speech.create(
        model="voxcpm2",
        voice=voice,
        input="Hello there.",
        response_format="wav",
        extra_body={"seed": seed, **extra},
    )
    samples, rate = decode(audio.content)
    assert rate == 24000 and samples.size > 0 and np.isfinite(samples).all()
    return samples


def voice_hash(url: str, voice_id: str) -> str:
    return httpx.get(f"{url}/v1/audio/voices/{voice_id}").json()["voice_prompt_hash"]


def test_a_voice_from_an_audio_sample_citing_a_consent_speaks_by_id_and_is_deleted(voxcpm_server):
    sample = wav_clip(1.5, pitch=150.0)
    with voxcpm_server() as url:
        sdk = client(url)
        consent = sdk.audio.voice_consents.create(
            name="John Doe", language="en-US", recording=("consent.wav", wav_clip(2.5, 140.0), "audio/wav")
        )
        voice = sdk.audio.voices.create(
            name="My new voice",
            consent=consent.id,
            audio_sample=("sample.wav", sample, "audio/x-wav"),
            # polyvox's extension: with its transcript a clip also primes the audio decoder, which
            # the tiny random model shows clearly (a clip alone changes it by about one 16-bit step).
            extra_body={"transcript": "A short test clip."},
        )
        assert (voice.object, voice.name, voice.type) == ("audio.voice", "My new voice", "audio_sample")
        assert re.fullmatch(r"voice_[0-9a-f]{16}", voice.id)
        assert abs(voice.created_at - time.time()) < 600

        by_id = speak(sdk, {"id": voice.id})
        # The voice is its sample: the same as cloning the clip once, unlike a builtin voice.
        clone = speak(sdk, "alloy", ref_audio=data_url(sample), ref_text="A short test clip.")
        np.testing.assert_allclose(clone, by_id, atol=2e-4)
        assert np.abs(speak(sdk, "alloy") - by_id).max() > 2e-4

        with pytest.raises(openai.ConflictError) as in_use:
            sdk.audio.voice_consents.delete(consent.id)
        assert in_use.value.body["code"] == "consent_in_use" and voice.id in in_use.value.body["message"]

        deleted = sdk.audio.voices.delete(voice.id)
        assert (deleted.id, deleted.deleted, deleted.object) == (voice.id, True, "audio.voice.deleted")
        with pytest.raises(openai.BadRequestError) as gone:
            speak(sdk, {"id": voice.id})
        assert gone.value.body["code"] == "voice_not_found"
        with pytest.raises(openai.NotFoundError):
            sdk.audio.voices.delete(voice.id)
        assert sdk.audio.voice_consents.delete(consent.id).deleted  # no voice cites it any more


def test_a_voice_from_a_prompt_is_frozen_once_like_a_builtin_and_survives_a_restart(voxcpm_server, tmp_path):
    alloy = load_builtin_voices()["alloy"]
    uploads = tmp_path / "voices" / "uploads"
    with voxcpm_server() as url:
        sdk = client(url)
        voice = sdk.audio.voices.create(name="Calm narrator", type="prompt", prompt=alloy.description)
        assert (voice.object, voice.type, voice.name) == ("audio.voice", "prompt", "Calm narrator")
        assert voice.prompt == alloy.description

        first = speak(sdk, {"id": voice.id}, seed=5)
        np.testing.assert_allclose(speak(sdk, {"id": voice.id}, seed=5), first, atol=1e-4)
        # The builtin voice of the same design (description, sentence, seed) is frozen into the same
        # clip, so it speaks the same.
        np.testing.assert_allclose(speak(sdk, "alloy", seed=5), first, atol=1e-4)
        (frozen_builtin,) = (tmp_path / "voices" / "builtin").glob("alloy-*.wav")
        (clip,) = uploads.glob(f"{voice.id}.*.wav")
        # The same clip: the same length, and samples within one 16-bit step (the two freezes run in
        # different batches, so a float rounding may land a sample on its neighbouring step).
        assert clip.stat().st_size == frozen_builtin.stat().st_size
        clip_samples, builtin_samples = (wav_samples(path) for path in (clip, frozen_builtin))
        assert np.abs(clip_samples - builtin_samples).max() <= 1

        # OpenAI's prompt form as JSON; a name that is a voice id is the id, spoken by name too.
        other = httpx.post(
            f"{url}/v1/audio/voices",
            json={"type": "prompt", "name": "narrator", "prompt": "A deep, slow, gravelly old voice"},
            timeout=120,
        )
        assert other.status_code == 201, other.text
        assert (other.json()["id"], other.json()["type"]) == ("narrator", "prompt")
        assert speak(sdk, "narrator", seed=5).size == first.size
        # Another description, or another sentence to speak (`script_hint`), designs another clip.
        scripted = sdk.audio.voices.create(
            name="Calm reader",
            type="prompt",
            prompt=alloy.description,
            script_hint="Good evening, and welcome to the late show.",
            model="auto",
        )
        hashes = [voice_hash(url, v) for v in (voice.id, "narrator", scripted.id)]
        assert len(set(hashes)) == 3
    saved = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in uploads.iterdir()}

    with voxcpm_server() as url:  # a restart: the clip is read back, never designed again
        assert voice_hash(url, voice.id) == hashes[0]
        np.testing.assert_allclose(speak(client(url), {"id": voice.id}, seed=5), first, atol=1e-4)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in uploads.iterdir()} == saved


def test_the_embedded_voice_refuses_a_prompt_voice_naming_voxcpm2(serve, tmp_path):
    embedded = pytest.importorskip("polyvox.backends.embedded")
    url = serve(embedded.EmbeddedBackend(max_workers=1), voices_dir=tmp_path)
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client(url).audio.voices.create(name="narrator", type="prompt", prompt="A warm, friendly voice")
    error = refused.value.body
    assert (error["param"], error["code"]) == ("prompt", "voice_design_unsupported")
    assert "VoxCPM2" in error["message"]
    assert "narrator" not in [v["id"] for v in httpx.get(f"{url}/v1/audio/voices").json()["voices"]]
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").iterdir())
