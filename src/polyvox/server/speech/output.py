"""How cached audio is replayed in chunks, as a back end would yield them."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import numpy as np

from polyvox.cache import CachedAudio

# Cached audio is fed to the OutputPipeline in pieces of this length, so hits stream like misses.
CACHED_CHUNK_S = 0.5


async def cached_chunks(cached: CachedAudio) -> AsyncGenerator[np.ndarray, None]:
    """Cached samples as chunks of `CACHED_CHUNK_S`, as a back end would yield them."""
    step = max(1, round(CACHED_CHUNK_S * cached.sample_rate))
    for start in range(0, cached.samples.size, step):
        yield cached.samples[start : start + step]
