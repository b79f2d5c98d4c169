"""Builtin voices on the tiny VoxCPM2: frozen once on first use (however many requests ask at once)
into a prompt file in the voices directory, then reused: the same seed gives the same audio across
requests and across a restart, which reads the file instead of generating the voice again."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np

from helpers.audio import decode
from helpers.metrics import scrape, value


def speak(url: str, voice: str, seed: int) -> np.ndarray:
    body = {"input": "The same words.", "voice": voice, "response_format": "wav", "seed": seed}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return decode(response.content)[0]


def test_a_builtin_voice_is_frozen_once_and_sounds_the_same_across_requests_and_restarts(
    voxcpm_server, tmp_path
):
    frozen_dir = tmp_path / "voices" / "builtin"
    with voxcpm_server() as url:

        async def first_uses() -> list[int]:
            async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                body = {"input": "First use.", "voice": "alloy", "response_format": "wav"}
                responses = await asyncio.gather(
                    *(client.post("/v1/audio/speech", json=body) for _ in range(3))
                )
                return [r.status_code for r in responses]

        assert asyncio.run(first_uses()) == [200, 200, 200]
        assert value(scrape(url), "polyvox_voice_builtin_freezes_total") == 1
        first = speak(url, "alloy", seed=5)
        np.testing.assert_allclose(speak(url, "alloy", seed=5), first, atol=1e-4)
        speak(url, "nova", seed=5)
        assert value(scrape(url), "polyvox_voice_builtin_freezes_total") == 2

    prompts = sorted(frozen_dir.glob("*.wav"))
    assert [p.name.split("-")[0] for p in prompts] == ["alloy", "nova"]
    alloy_file = prompts[0]
    saved = (alloy_file.read_bytes(), alloy_file.stat().st_mtime_ns)
    assert prompts[0].read_bytes() != prompts[1].read_bytes()  # two designs, two voices
    rate_and_samples = decode(saved[0])
    assert rate_and_samples[1] == 48000 and rate_and_samples[0].size > 0

    with voxcpm_server() as url:  # a restart: new app, new engine, same voices directory
        np.testing.assert_allclose(speak(url, "alloy", seed=5), first, atol=1e-4)
        assert value(scrape(url), "polyvox_voice_builtin_freezes_total") == 0
    assert (alloy_file.read_bytes(), alloy_file.stat().st_mtime_ns) == saved
