"""The audio cache knows a voice by its clip's content, never by its name."""

from __future__ import annotations

import httpx

from voices.clips import wav_clip
from voices.test_voice_api import upload


def _speak(url: str, voice: str) -> httpx.Response:
    body = {"input": "Hello there.", "voice": voice, "response_format": "wav", "seed": 3}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response


def test_two_names_for_one_clip_share_cached_audio(voxcpm_server, tmp_path):
    clip = wav_clip(1.5, pitch=170.0)
    with voxcpm_server(cache_enabled=True, cache_dir=str(tmp_path / "cache")) as url:
        assert upload(url, "first", clip, transcript="A short test clip.").status_code == 201
        assert upload(url, "second", clip, transcript="A short test clip.").status_code == 201
        miss = _speak(url, "first")
        hit = _speak(url, "second")
        assert miss.headers["x-cache"] == "MISS"
        assert hit.headers["x-cache"] == "HIT"
        assert hit.content == miss.content
        other = wav_clip(1.5, pitch=120.0)
        assert upload(url, "third", other, transcript="A short test clip.").status_code == 201
        assert _speak(url, "third").headers["x-cache"] == "MISS"
