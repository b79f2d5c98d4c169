"""The small pure rules of shaping a response's audio: how `speed` is split between the engine and
the OutputPipeline, how cached audio is replayed in chunks, and how a streamed file is made whole."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np

from polyvox.audio import formats
from polyvox.audio.encode import wav_header
from polyvox.backends.base import BackendInfo
from polyvox.cache import CachedAudio

# Cached audio is fed to the OutputPipeline in pieces of this length, so hits stream like misses.
CACHED_CHUNK_S = 0.5


def split_speed(info: BackendInfo, speed: float) -> tuple[float, float]:
    """(engine speed, pipeline speed) whose product is `speed`: engines with native speed apply it
    (up to `info.extra["max_native_speed"]`), the OutputPipeline time-stretches the rest."""
    backend_speed = min(speed, float(info.extra.get("max_native_speed", "inf"))) if info.native_speed else 1.0
    return backend_speed, speed / backend_speed


async def cached_chunks(cached: CachedAudio) -> AsyncIterator[np.ndarray]:
    """Cached samples as chunks of `CACHED_CHUNK_S`, as an engine would yield them."""
    step = max(1, round(CACHED_CHUNK_S * cached.sample_rate))
    for start in range(0, cached.samples.size, step):
        yield cached.samples[start : start + step]


def complete_file(data: bytes, fmt: formats.AudioFormat, sample_rate: int) -> bytes:
    """A whole stream-encoded file made exact: WAV gets its real sizes instead of the streaming ones."""
    if fmt.name == "wav" and len(data) >= 44:
        return wav_header(sample_rate, (len(data) - 44) // 2) + data[44:]
    return data
