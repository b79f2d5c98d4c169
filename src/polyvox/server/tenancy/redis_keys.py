"""Named keys in Redis (`state_url`): one hash, digest → key JSON, and a version counter that moves
with every change, so a replica sees a key made or revoked anywhere at its next look (at most
`KeyTable.FRESH_S` later). The counter is also `KeySnapshot.counter`: when Redis loses its data it
is gone, which is how a replica knows to republish its copy (`restore`)."""

from __future__ import annotations

import json

import redis

from polyvox.server.tenancy.keys import ApiKey, KeyNameTaken, KeySnapshot

KEYS_HASH = "polyvox:keys"
VERSION_KEY = "polyvox:keys:version"
# A request that needs a key waits at most this long on a Redis that does not answer (then it is
# refused 503 until Redis answers again).
CONNECT_TIMEOUT_S = 0.5
CALL_TIMEOUT_S = 0.5
_SET_IF_PRESENT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
"""
# KEYS: the hash, the counter. ARGV: the counter before the loss, then digest, JSON pairs to put back.
_RESTORE = """
for i = 2, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
local now = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('SET', KEYS[2], math.max(now, tonumber(ARGV[1])) + 1)
"""


class RedisKeyStore:
    def __init__(self, client: redis.Redis):
        self.client = client
        kwargs = client.connection_pool.connection_kwargs
        self.where = f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"

    @classmethod
    def from_url(cls, url: str) -> RedisKeyStore:
        return cls(
            redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CALL_TIMEOUT_S)
        )

    def all(self) -> list[ApiKey]:
        return [ApiKey.from_json(json.loads(raw)) for raw in self.client.hvals(KEYS_HASH)]

    def read(self) -> KeySnapshot:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hvals(KEYS_HASH)
            pipe.get(VERSION_KEY)
            raws, counter = pipe.execute()
        keys = [ApiKey.from_json(json.loads(raw)) for raw in raws]
        return KeySnapshot(keys, None if counter is None else int(counter))

    def add(self, key: ApiKey) -> None:
        # WATCH/MULTI: two replicas making the same name at once cannot both succeed.
        with self.client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(KEYS_HASH)
                    if any(
                        ApiKey.from_json(json.loads(raw)).name == key.name for raw in pipe.hvals(KEYS_HASH)
                    ):
                        raise KeyNameTaken(key.name)
                    pipe.multi()
                    pipe.hset(KEYS_HASH, key.digest, json.dumps(key.to_json()))
                    pipe.incr(VERSION_KEY)
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue

    def remove(self, key_id: str) -> bool:
        for key in self.all():
            if key.id == key_id:
                with self.client.pipeline() as pipe:
                    pipe.hdel(KEYS_HASH, key.digest)
                    pipe.incr(VERSION_KEY)
                    removed, _ = pipe.execute()
                return bool(removed)
        return False

    def restore(self, keys: list[ApiKey], above: int) -> None:
        pairs = [item for key in keys for item in (key.digest, json.dumps(key.to_json()))]
        self.client.eval(_RESTORE, 2, KEYS_HASH, VERSION_KEY, above, *pairs)

    def touch(self, used: dict[str, int]) -> None:
        # Last-used times do not move the version: they never change who may do what. Written only
        # while the key is still there, atomically, so a touch never brings a revoked key back.
        for key in self.all():
            when = used.get(key.id)
            if when is not None and (key.last_used_at or 0) < when:
                self.client.eval(
                    _SET_IF_PRESENT, 1, KEYS_HASH, key.digest, json.dumps(key.used_at(when).to_json())
                )

    def version(self) -> object:
        return self.client.get(VERSION_KEY)
