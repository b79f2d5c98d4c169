"""Hostile reference clips through real servers on loopback, on every path that takes a clip (the voice
API, a multipart upload, JSON `ref_audio` from the `openai` SDK): a 2 MB FLAC of 53 hours is refused
with 400 `audio_too_long`, its decoding stopped at the limit, while a normal request sent at the same
moment is served; a clip with NaN or infinite samples is refused with 400 `invalid_audio` (before the
embedded voice's 422 for cloning) and stored nowhere, while a finite clip clones on the tiny VoxCPM2;
a WAV whose header claims 10^9 samples over 2 s of data is refused for what its header states."""

from __future__ import annotations

import asyncio
import base64

import httpx
import numpy as np
import openai
import pytest

from audio.hostile_clips import float_wav, long_silent_flac, wav_claiming
from helpers.audio import decode
from polyvox.backends.fake import FakeBackend
from voices.clips import voice_like

SPEECH = "/v1/audio/speech"
VOICES = "/v1/audio/voices"
NON_FINITE = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def non_finite_clip(value: float) -> bytes:
    """1.5 s of a voice-like float WAV with 10 ms of `value` in the middle."""
    samples = voice_like(1.5).astype(np.float64)
    samples[18000:18240] = value
    return float_wav(samples)


def assert_openai_error(response: httpx.Response, status: int, param: str, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["param"], error["code"]) == (param, code)
    return error["message"]


def test_53_hour_clips_are_refused_while_a_normal_request_sent_with_them_is_served(embedded_url):
    stated, _ = long_silent_flac(53)
    hidden, _ = long_silent_flac(53, state_length=False)  # no stated length: found while decoding
    assert len(hidden) < 2_000_000

    async def main() -> list:
        client = openai.AsyncOpenAI(base_url=f"{embedded_url}/v1", api_key="unused", max_retries=0)
        async with httpx.AsyncClient(base_url=embedded_url, timeout=120) as http:

            def speech(text: str, **extra):
                return client.audio.speech.create(
                    model="tts-1", voice="alloy", input=text, response_format="wav", extra_body=extra or None
                )

            return await asyncio.gather(
                speech("Cloned from a clip that says it is long.", ref_audio=b64(stated)),
                speech("Cloned from a clip that hides its length.", ref_audio=b64(hidden)),
                http.post(
                    SPEECH, data={"input": "Uploaded.", "voice": "alloy"}, files={"speaker_wav": hidden}
                ),
                http.post(VOICES, data={"name": "long-one", "consent": "true"}, files={"audio": hidden}),
                speech("A normal request, sent at the same moment, is served."),
                return_exceptions=True,
            )

    stated_json, hidden_json, multipart, upload, normal = asyncio.run(main())
    for refused, how in ((stated_json, "header states 1907"), (hidden_json, "decoding stopped")):
        assert isinstance(refused, openai.BadRequestError), refused
        assert (refused.code, refused.param) == ("audio_too_long", "ref_audio")
        assert how in refused.message
    assert "decoding stopped" in assert_openai_error(multipart, 400, "speaker_wav", "audio_too_long")
    assert "decoding stopped" in assert_openai_error(upload, 400, "audio", "audio_too_long")
    samples, rate = decode(normal.content)
    assert rate == 24000 and samples.size > 0.5 * rate


@pytest.mark.parametrize("value", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_a_non_finite_clip_is_invalid_audio_on_every_path(serve, tmp_path, value):
    url = serve(voices_dir=tmp_path)
    clip = non_finite_clip(value)
    upload = httpx.post(f"{url}{VOICES}", data={"name": "nan", "consent": "true"}, files={"audio": clip})
    assert "not finite" in assert_openai_error(upload, 400, "audio", "invalid_audio")
    assert httpx.get(f"{url}{VOICES}/nan").status_code == 404
    multipart = httpx.post(f"{url}{SPEECH}", data={"input": "Hello."}, files={"custom_voice_file": clip})
    assert_openai_error(multipart, 400, "custom_voice_file", "invalid_audio")
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hi.", extra_body={"ref_audio": b64(clip)}
        )
    assert (info.value.code, info.value.param) == ("invalid_audio", "ref_audio")


def test_the_embedded_voice_calls_a_non_finite_clip_invalid_before_saying_it_cannot_clone(embedded_url):
    def clone(clip: bytes) -> httpx.Response:
        return httpx.post(
            f"{embedded_url}{SPEECH}", json={"input": "Hello.", "ref_audio": b64(clip)}, timeout=60
        )

    assert_openai_error(clone(non_finite_clip(np.nan)), 400, "ref_audio", "invalid_audio")
    assert clone(float_wav(voice_like(1.5))).json()["error"]["code"] == "cloning_unsupported"


def test_voxcpm2_refuses_non_finite_clips_and_clones_from_finite_ones(voxcpm_server):
    bad, good = non_finite_clip(np.nan), float_wav(voice_like(1.5))
    with voxcpm_server() as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)

        def clone(clip: bytes):
            return client.audio.speech.create(
                model="voxcpm2",
                voice="alloy",
                input="Cloned.",
                response_format="wav",
                extra_body={"ref_audio": b64(clip)},
            )

        with pytest.raises(openai.BadRequestError) as info:
            clone(bad)
        assert (info.value.code, info.value.param) == ("invalid_audio", "ref_audio")
        multipart = httpx.post(
            f"{url}{SPEECH}", data={"input": "Cloned."}, files={"voice_file": bad}, timeout=60
        )
        assert_openai_error(multipart, 400, "voice_file", "invalid_audio")
        upload = httpx.post(f"{url}{VOICES}", data={"name": "nan", "consent": "true"}, files={"audio": bad})
        assert_openai_error(upload, 400, "audio", "invalid_audio")
        assert httpx.get(f"{url}{VOICES}/nan").status_code == 404
        samples, rate = decode(clone(good).content)
        assert samples.size > 0.4 * rate and np.isfinite(samples).all()


def test_a_wav_header_claiming_more_than_the_limit_is_refused_though_the_file_holds_two_seconds(
    serve, tmp_path
):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    lying = wav_claiming(10**9, 2.0)  # 41,667 s at 24 kHz, claimed; 2 s held
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.voices.create(name="liar", consent="true", audio_sample=("liar.wav", lying, "audio/wav"))
    assert (refused.value.code, refused.value.param) == ("audio_too_long", "audio_sample")
    assert "header states 41666.7 s" in refused.value.message
    assert httpx.get(f"{url}{VOICES}/liar").status_code == 404
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").iterdir())
    one_off = httpx.post(f"{url}{SPEECH}", json={"input": "Hello.", "ref_audio": b64(lying)})
    assert "header states" in assert_openai_error(one_off, 400, "ref_audio", "audio_too_long")

    # A header that claims what the file holds, or no length at all (a streamed WAV's 0xFFFFFFFF), is fine.
    honest = client.audio.voices.create(
        name="honest", consent="true", audio_sample=("honest.wav", wav_claiming(48000, 2.0), "audio/wav")
    )
    assert honest.id == "honest"
    streamed = bytearray(wav_claiming(48000, 2.0))
    streamed[4:8] = streamed[40:44] = b"\xff\xff\xff\xff"
    unsized = client.audio.voices.create(
        name="streamed", consent="true", audio_sample=("streamed.wav", bytes(streamed), "audio/wav")
    )
    assert httpx.get(f"{url}{VOICES}/{unsized.id}").json()["duration_s"] == pytest.approx(2.0, abs=0.01)
