"""The VoxCPM2 engine's voice prompt cache: encoded clips (VAE latents) are kept by content hash in a
bounded LRU, so a clip used again is not encoded again, and the least recently used one goes first."""

from __future__ import annotations

import asyncio

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.settings import Settings
from polyvox.voices import ClipLimits, clip_rate, load_clip
from voices.clips import wav_clip


def test_the_prompt_cache_is_a_bounded_lru_keyed_by_content(tiny_model):
    backend = VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=256), prompt_cache_size=2)
    rate = clip_rate(backend.info)
    a, b, c = (load_clip(wav_clip(1.2, pitch=p), ClipLimits(), rate) for p in (110.0, 170.0, 230.0))
    same_as_a = load_clip(wav_clip(1.2, pitch=110.0), ClipLimits(), rate)  # equal bytes, another object

    async def speak(*references) -> list[int]:
        encodes = []
        for reference in references:
            request = SynthesisRequest(text="Hi.", reference=reference, max_patches=1, seed=1)
            async for _ in backend.generate(request):
                pass
            encodes.append(backend.prompt_encodes)
        return encodes

    async def main() -> list[int]:
        await backend.start()
        try:
            return await speak(a, same_as_a, b, a, c, a, b)
        finally:
            await backend.stop()

    # a, a again (hit), b, a (hit: now most recent), c (evicts b), a (hit), b (evicted: encoded again)
    assert asyncio.run(main()) == [1, 1, 2, 2, 3, 3, 4]
    assert backend.prompt_cache_hits == 3


def test_the_prompt_cache_size_comes_from_the_settings():
    settings = Settings(random_weights="tiny", device="cpu", voice_prompt_cache_size=5)
    assert VoxCPMBackend.from_settings(settings).prompt_cache_size == 5
