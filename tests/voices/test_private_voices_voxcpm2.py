"""Private voices on the tiny VoxCPM2 (a real cloning engine, audio cache on): key A's cloned voice is
spoken by A (the second time from the cache) and by an admin key, and for key B it is 404 on its
detail, absent from the lists, and an unknown voice on speech over HTTP and the WebSocket, so B is
never served the audio cached for A. Keys made through /admin/keys, the official client."""

from __future__ import annotations

import json

import httpx
import openai
from websockets.sync.client import connect

from helpers.audio import decode
from voices.clips import wav_clip

ADMIN = "voxcpm-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def speak(url: str, key: str, voice: str) -> httpx.Response:
    body = {"model": "voxcpm2", "voice": voice, "input": "Hello there.", "response_format": "wav", "seed": 3}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=120)


def test_key_as_cloned_voice_is_unknown_to_key_b_and_spoken_for_a(voxcpm_server, tmp_path) -> None:
    settings = {"admin_api_keys": [ADMIN], "cache_enabled": True, "cache_dir": tmp_path / "cache"}
    with voxcpm_server(**settings) as url:
        a, b = (
            httpx.post(f"{url}/admin/keys", json={"name": name}, headers=bearer(ADMIN)).json()["key"]
            for name in ("voxcpm-a", "voxcpm-b")
        )
        sdk = openai.OpenAI(base_url=f"{url}/v1", api_key=a, max_retries=0)
        consent = sdk.audio.voice_consents.create(
            name="Ann", language="en-US", recording=("c.wav", wav_clip(2.0, 140.0), "audio/wav")
        )
        voice = sdk.audio.voices.create(
            name="Ann's voice", consent=consent.id, audio_sample=("s.wav", wav_clip(1.5, pitch=150.0))
        ).id

        made = speak(url, a, voice)
        assert made.status_code == 200 and made.headers["x-cache"] == "MISS"
        samples, rate = decode(made.content)
        assert rate == 24000 and samples.size > 0
        again = speak(url, a, voice)
        assert again.headers["x-cache"] == "HIT" and again.content == made.content
        assert speak(url, ADMIN, voice).content == made.content

        refused = speak(url, b, voice)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "voice_not_found"
        assert httpx.get(f"{url}/v1/audio/voices/{voice}", headers=bearer(b)).status_code == 404
        listed = httpx.get(f"{url}/v1/voices", headers=bearer(b)).json()["data"]
        assert voice not in {item["id"] for item in listed} and "alloy" in {item["id"] for item in listed}
        ws_url = url.replace("http://", "ws://") + "/v1/audio/speech/ws"
        for key, expected in ((b, "error"), (a, "ready")):
            with connect(ws_url, additional_headers=bearer(key)) as ws:
                ws.send(json.dumps({"type": "config", "voice": voice}))
                assert json.loads(ws.recv(timeout=60))["type"] == expected
