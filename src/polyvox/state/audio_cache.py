"""The audio cache in Redis, shared by every replica: the same entries as `cache.AudioCache` (the
engine-rate float32 PCM of a finished synthesis and its word timings, if any, by the same key), each
with the cache's TTL, under a size cap kept by least-recent use across all replicas.

An entry is a string `<prefix>entry:<key>` holding a small header and the samples; the sorted set
`lru` (last use), the hash `sizes` and the counter `bytes` account for the cap. A put and its
evictions run as one Lua script, so replicas never race on the total. Entries Redis expired (their
TTL) or evicted (its own maxmemory, `volatile-lru`) leave their accounting behind until a lookup
misses them or `trim_expired` finds them. Redis unreachable: every lookup is a miss and nothing is
stored (see `StateConnection`).
"""

from __future__ import annotations

import contextlib
import logging
import struct
import time
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from polyvox.alignment.timeline import PieceTiming, pieces_from_bytes, pieces_to_bytes
from polyvox.cache import CachedAudio
from polyvox.state.connection import StateConnection, StateUnavailable

log = logging.getLogger(__name__)

PREFIX = "polyvox:cache:"
_HEADER = struct.Struct("<4sIII")  # magic, sample rate, sample count, bytes of word timings after them
HEADER_BYTES = _HEADER.size  # an entry's size beyond its samples and timings, as the size cap counts it
_MAGIC = b"PVX2"  # PVX1 had no word timings (its keys, which name the cache format, are never asked again)

_PUT = """
local size = string.len(ARGV[1])
local old = tonumber(redis.call('HGET', KEYS[3], ARGV[5]) or '0')
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('HSET', KEYS[3], ARGV[5], size)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
local total = redis.call('INCRBY', KEYS[4], size - old)
while total > tonumber(ARGV[4]) do
  local victim = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if (not victim) or victim == ARGV[5] then break end
  local victim_size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('ZREM', KEYS[2], victim)
  redis.call('HDEL', KEYS[3], victim)
  redis.call('DEL', ARGV[6] .. victim)
  total = redis.call('DECRBY', KEYS[4], victim_size)
end
return {total, redis.call('ZCARD', KEYS[2])}
"""

_FORGET = """
local forgotten = 0
for i = 1, #ARGV - 1 do
  local size = redis.call('HGET', KEYS[2], ARGV[i])
  if size then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('DECRBY', KEYS[3], tonumber(size))
    forgotten = forgotten + 1
  end
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('DEL', ARGV[#ARGV] .. ARGV[i])
end
return {tonumber(redis.call('GET', KEYS[3]) or '0'), redis.call('ZCARD', KEYS[1]), forgotten}
"""


class RedisAudioCache:
    """`AudioCache`'s interface (`get`, `put`, `clear`, `len`, `size_bytes`) over Redis.

    `ttl_s` of 0 or None means entries never expire. `on_change(entries, bytes)` reports the size."""

    def __init__(
        self,
        connection: StateConnection,
        max_bytes: int,
        ttl_s: float | None = None,
        on_change: Callable[[int, int], None] | None = None,
        prefix: str = PREFIX,
    ):
        self.connection = connection
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s or None
        self._on_change = on_change
        self._prefix = prefix
        self._keys = [f"{prefix}lru", f"{prefix}sizes", f"{prefix}bytes"]
        self._put = connection.client.register_script(_PUT)
        self._forget = connection.client.register_script(_FORGET)
        self._entries = 0
        self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return self._entries

    def get(self, key: str) -> CachedAudio | None:
        """The entry's audio, or None (absent, expired, damaged, or Redis unreachable: all a miss)."""
        lru, _, _ = self._keys

        def fetch(client):
            data = client.get(self._entry(key))
            if data is not None:
                client.zadd(lru, {key: time.time()}, xx=True)
            return data

        try:
            data = self.connection.call("cache_get", fetch)
        except StateUnavailable:
            return None
        if data is None:
            self._drop([key])
            return None
        try:
            magic, rate, count, timed = _HEADER.unpack_from(data)
        except struct.error:
            magic, rate, count, timed = b"", 0, -1, 0
        body = memoryview(data)[_HEADER.size :]
        pieces = pieces_from_bytes(bytes(body[count * 4 :])) if timed and count >= 0 else None
        if magic != _MAGIC or len(body) != count * 4 + timed or (timed and pieces is None):
            self._drop([key])
            return None
        return CachedAudio(np.frombuffer(body, dtype="<f4", count=count).astype(np.float32), rate, pieces)

    def put(
        self, key: str, samples: np.ndarray, sample_rate: int, pieces: Sequence[PieceTiming] | None = None
    ) -> bool:
        """Store with the TTL and evict the least recently used past the cap; False if not stored."""
        body = np.ascontiguousarray(samples, dtype="<f4").tobytes()
        timings = pieces_to_bytes(pieces) if pieces is not None else b""
        data = _HEADER.pack(_MAGIC, sample_rate, len(body) // 4, len(timings)) + body + timings
        if len(data) > self.max_bytes:
            return False
        ttl_ms = int(self.ttl_s * 1000) if self.ttl_s else 0
        args: list[bytes | str | int | float]
        args = [data, ttl_ms, time.time(), self.max_bytes, key, self._entry("")]
        try:
            total, entries = self.connection.call(
                "cache_put", lambda _client: self._put(keys=[self._entry(key), *self._keys], args=args)
            )
        except StateUnavailable as exc:
            log.debug("audio cache entry not stored: %s", exc)
            return False
        self._report(int(entries), int(total))
        return True

    def refresh(self) -> None:
        """Read the shared totals (entries, bytes), which other replicas' puts also change."""

        def totals(client) -> tuple[int, int]:
            pipe = client.pipeline(transaction=False)
            pipe.zcard(self._keys[0])
            pipe.get(self._keys[2])
            entries, size = pipe.execute()
            return int(entries), int(size or 0)

        with contextlib.suppress(StateUnavailable):
            self._report(*self.connection.call("cache_stats", totals))

    def trim_expired(self) -> int:
        """Forget the accounting of entries unused for longer than the TTL (so Redis has expired
        them); returns how many. A no-op without a TTL."""
        if self.ttl_s is None:
            return 0
        lru, ttl_s = self._keys[0], self.ttl_s
        try:
            stale = cast(  # member names, as bytes (the client does not decode responses)
                "list[bytes]",
                self.connection.call(
                    "cache_trim", lambda client: client.zrangebyscore(lru, "-inf", time.time() - ttl_s)
                ),
            )
        except StateUnavailable:
            return 0
        return self._drop([member.decode() for member in stale])

    def clear(self) -> None:
        def members(client) -> list[str]:
            return [m.decode() for m in client.zrange(self._keys[0], 0, -1)]

        with contextlib.suppress(StateUnavailable):
            self._drop(self.connection.call("cache_clear", members))

    def _drop(self, keys: list[str]) -> int:
        if not keys:
            return 0
        try:
            total, entries, forgotten = self.connection.call(
                "cache_forget", lambda _client: self._forget(keys=self._keys, args=[*keys, self._entry("")])
            )
        except StateUnavailable:
            return 0
        self._report(int(entries), int(total))
        return int(forgotten)

    def _entry(self, key: str) -> str:
        return f"{self._prefix}entry:{key}"

    def _report(self, entries: int, size: int) -> None:
        self._entries, self._bytes = entries, size
        if self._on_change is not None:
            self._on_change(entries, size)
