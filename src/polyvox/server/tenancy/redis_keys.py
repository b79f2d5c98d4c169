"""Named keys in Redis (`state_url`): one hash, digest → key JSON, and a version counter that moves
with every change, so a replica sees a key made or revoked anywhere at its next look (at most
`KeyTable.FRESH_S` later)."""

from __future__ import annotations

import json

import redis

from polyvox.server.tenancy.keys import ApiKey, KeyNameTaken

KEYS_HASH = "polyvox:keys"
VERSION_KEY = "polyvox:keys:version"
CONNECT_TIMEOUT_S = 1.0
CALL_TIMEOUT_S = 3.0
_SET_IF_PRESENT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
"""


class RedisKeyStore:
    def __init__(self, client: redis.Redis):
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> RedisKeyStore:
        return cls(
            redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CALL_TIMEOUT_S)
        )

    def all(self) -> list[ApiKey]:
        return [ApiKey.from_json(json.loads(raw)) for raw in self.client.hvals(KEYS_HASH)]

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
