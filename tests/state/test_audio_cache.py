"""The audio cache in Redis (`state.audio_cache`) against a real redis-server: entries are shared by
separate connections (replicas), bounded by a size cap and a TTL, and a Redis outage is a miss, never
an error, until Redis is back."""

from __future__ import annotations

import time

import numpy as np

from polyvox.state.audio_cache import HEADER_BYTES, RedisAudioCache
from polyvox.state.connection import StateConnection


def replica(url: str, max_bytes: int = 10_000_000, ttl_s: float | None = None) -> RedisAudioCache:
    connection = StateConnection(url)
    assert connection.check()
    return RedisAudioCache(connection, max_bytes, ttl_s)


def tone(seconds: float, rate: int = 24_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_an_entry_stored_by_one_replica_is_read_by_another(redis_server):
    one, two = replica(redis_server.url), replica(redis_server.url)
    samples = tone(0.5)
    assert one.put("k1", samples, 24_000)
    found = two.get("k1")
    assert found is not None and found.sample_rate == 24_000
    np.testing.assert_array_equal(found.samples, samples)
    assert two.get("absent") is None


def test_the_size_cap_evicts_the_least_recently_used(redis_server):
    entry = len(tone(0.2).tobytes()) + HEADER_BYTES
    one, two = replica(redis_server.url, max_bytes=2 * entry), replica(redis_server.url, max_bytes=2 * entry)
    one.put("a", tone(0.2), 24_000)
    two.put("b", tone(0.2), 24_000)
    assert one.get("a") is not None  # "a" is now more recent than "b"
    two.put("c", tone(0.2), 24_000)
    assert one.get("b") is None
    assert one.get("a") is not None and one.get("c") is not None
    two.refresh()
    assert len(two) == 2 and two.size_bytes <= 2 * entry
    assert not one.put("huge", tone(1.0), 24_000)  # larger than the whole cap: not stored


def test_entries_expire_after_the_ttl(redis_server):
    cache = replica(redis_server.url, ttl_s=0.2)
    cache.put("k", tone(0.1), 24_000)
    assert cache.get("k") is not None
    time.sleep(0.5)
    assert cache.get("k") is None
    assert len(cache) == 0 and cache.size_bytes == 0  # its accounting went with it


def test_an_outage_is_a_miss_counted_and_then_resumes(redis_server):
    cache = replica(redis_server.url)
    cache.put("k", tone(0.1), 24_000)
    redis_server.stop()
    assert cache.get("k") is None
    assert not cache.put("k2", tone(0.1), 24_000)
    assert not cache.connection.check() and not cache.connection.available
    assert "unreachable" in cache.connection.describe()
    assert cache.connection.failures["cache_get"] >= 1 and cache.connection.failures["cache_put"] >= 1
    redis_server.start()  # same port, data lost (no persistence)
    assert cache.connection.check()
    assert cache.put("k3", tone(0.1), 24_000)
    assert cache.get("k3") is not None
