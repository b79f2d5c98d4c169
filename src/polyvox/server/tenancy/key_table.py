"""`KeyTable`: the server's copy of the named keys, looked up on every request without a round trip.
It is read again from the store when it is older than `FRESH_S` (a revoked key is refused by every API
process and replica within that time), and at once when a request brings a key it does not know (a key
just made elsewhere works at once), at most every `MISS_REREAD_S`. Last-used times are kept here and
written to the store at most every `TOUCH_EVERY_S`."""

from __future__ import annotations

import asyncio
import logging
import time

import anyio

from polyvox.server.tenancy.key_store import KeyStore
from polyvox.server.tenancy.keys import ApiKey

log = logging.getLogger(__name__)

FRESH_S = 0.5
MISS_REREAD_S = 0.1
TOUCH_EVERY_S = 60.0


class KeyTable:
    def __init__(self, store: KeyStore):
        self.store = store
        self._by_digest: dict[str, ApiKey] = {}
        self._version: object = None
        self._read_at = -float("inf")
        self._lock = asyncio.Lock()
        self._used: dict[str, int] = {}
        self._touched_at = time.monotonic()
        self.reachable = True

    async def is_empty(self) -> bool:
        """Whether no named key is stored (as of FRESH_S ago): then a server without the settings'
        keys is open."""
        await self.refresh(FRESH_S)
        return not self._by_digest

    def keys(self) -> list[ApiKey]:
        return sorted(self._by_digest.values(), key=lambda key: key.created_at)

    def with_recent_use(self, key: ApiKey) -> ApiKey:
        """`key` with its last use through this process, if later than the store's record."""
        used = self._used.get(key.id)
        return key if used is None or (key.last_used_at or 0) >= used else key.used_at(used)

    async def lookup(self, digest: str) -> ApiKey | None:
        """The named key with this digest, as the store holds it now (within FRESH_S)."""
        await self.refresh(FRESH_S)
        key = self._by_digest.get(digest)
        if key is None:
            await self.refresh(MISS_REREAD_S)
            key = self._by_digest.get(digest)
        if key is not None:
            self._used[key.id] = int(time.time())
        return key

    async def refresh(self, older_than_s: float = 0.0) -> None:
        if time.monotonic() - self._read_at < older_than_s:
            return
        async with self._lock:
            if time.monotonic() - self._read_at < older_than_s:
                return  # another request read it meanwhile
            await anyio.to_thread.run_sync(self._read)

    def _read(self) -> None:
        try:
            if time.monotonic() - self._touched_at > TOUCH_EVERY_S and self._used:
                used, self._used = self._used, {}
                self.store.touch(used)
                self._touched_at = time.monotonic()
            version = self.store.version()
            if version != self._version or version is None:
                self._by_digest = {key.digest: key for key in self.store.all()}
                self._version = version
            self.reachable = True
        except Exception as exc:  # Redis away, a file being replaced: keep the last copy
            if self.reachable:
                log.warning("named keys: cannot read their store (%s); serving the last copy", exc)
            self.reachable = False
        self._read_at = time.monotonic()
