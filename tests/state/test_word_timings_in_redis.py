"""The audio cache in Redis keeps an answer's word timings with its audio, as the disk cache does: one
replica stores them, another reads the same words back; an entry without them has none."""

from __future__ import annotations

import numpy as np

from polyvox.alignment.timeline import PieceTiming
from polyvox.alignment.words import WordTiming
from polyvox.state.audio_cache import RedisAudioCache
from polyvox.state.connection import StateConnection

PIECES = (
    PieceTiming(0, "Hi there.", 0.0, 0.5, (WordTiming("Hi", 0.0, 0.2), WordTiming("there.", 0.25, 0.5))),
    PieceTiming(1, "5 kg.", 0.5, 1.4, (WordTiming("5 kg.", 0.55, 1.35, approximate=True),)),
)


def replica(url: str) -> RedisAudioCache:
    connection = StateConnection(url)
    assert connection.check()
    return RedisAudioCache(connection, 10_000_000)


def test_words_stored_by_one_replica_are_read_by_another(redis_server) -> None:
    one, two = replica(redis_server.url), replica(redis_server.url)
    samples = np.linspace(-1, 1, 2400, dtype=np.float32)
    assert one.put("timed", samples, 24_000, PIECES) and one.put("plain", samples, 24_000)
    timed, plain = two.get("timed"), two.get("plain")
    assert timed is not None and plain is not None
    np.testing.assert_array_equal(timed.samples, samples)
    assert timed.pieces == PIECES and plain.pieces is None
