"""`KeyTable`: the server's copy of the named keys, looked up on every request without a round trip,
and whether this server requires keys at all (`required`).

It is read again from the store when it is older than `FRESH_S` (a revoked key is refused by every API
process and replica within that time), and whenever a request brings a key it does not know, so a key
just made elsewhere works at once: each such request costs a look at the store's version (one stat, one
Redis GET), and the table is read whole only when that changed. Last-used times are kept here and
written to the store at most every `TOUCH_EVERY_S`.

`required` is decided as the server starts and only ever turns on: a server that requires keys never
opens again, whatever its store then holds. When the store cannot vouch for the keys (`problem`: it
cannot be read, or its key table vanished and this copy has none to give back), every request that is
not made with a key of the settings is refused 503 until it can. When the store lost its keys and this
copy holds some, they are written back (`KeyStore.restore`), as replicas republish their voices."""

from __future__ import annotations

import asyncio
import logging
import time

import anyio

from polyvox.server.tenancy.key_store import KeyStore
from polyvox.server.tenancy.keys import ApiKey, KeySnapshot

log = logging.getLogger(__name__)

FRESH_S = 0.5
TOUCH_EVERY_S = 60.0


class KeyTable:
    def __init__(self, store: KeyStore, required: bool = False, settings_keys: bool = False):
        self.store = store
        self.required = required
        self.settings_keys = settings_keys  # the settings name keys of their own (they need no store)
        self._had_table = False  # this server has seen the store hold a key table
        self.problem: str | None = None
        self._by_digest: dict[str, ApiKey] = {}
        self._counter: int | None = None
        self._version: object = None
        self._read_at = -float("inf")
        self._lock = asyncio.Lock()
        self._used: dict[str, int] = {}
        self._touched_at = time.monotonic()

    @classmethod
    def at_start(cls, store: KeyStore, required_by_settings: bool, settings_keys: bool) -> KeyTable:
        """Read once (blocking): the server requires keys when its settings say so or name keys, or
        when the store holds a key table (one whose last key was revoked included), or when the store
        cannot be read now (closed until it can)."""
        table = cls(store, required_by_settings or settings_keys, settings_keys)
        try:
            snapshot = store.read()
            table._version = store.version()
        except Exception as exc:  # Redis away, a broken file: closed until it can be read
            table.required = True
            table._set_problem(_unreadable(store, exc))
            return table
        table._by_digest = {key.digest: key for key in snapshot.keys}
        table._counter = snapshot.counter
        table._had_table = snapshot.counter is not None
        table._read_at = time.monotonic()
        table.required = table.required or snapshot.counter is not None
        table._set_problem(table._why_not_vouched())
        return table

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
        if key is None:  # made elsewhere since the last look? (a version check unless it changed)
            await self.refresh()
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
                snapshot = self.store.read()
                if self._lost(snapshot):
                    self._give_back(snapshot)
                    snapshot = self.store.read()
                    version = self.store.version()
                self._take(snapshot)
                self._version = version
            problem = self._why_not_vouched()
        except Exception as exc:  # Redis away, a file being replaced or broken
            problem = _unreadable(self.store, exc)
            self._version = None  # read it whole once it answers again
        self._set_problem(problem if self.required else None)
        self._read_at = time.monotonic()

    def _lost(self, snapshot: KeySnapshot) -> bool:
        """The store lost keys this copy holds: its counter vanished or went back."""
        if not self._by_digest or self._counter is None:
            return False
        return snapshot.counter is None or snapshot.counter < self._counter

    def _give_back(self, snapshot: KeySnapshot) -> None:
        copies = list(self._by_digest.values())
        log.warning(
            "named keys: the key store (%s) lost its keys (its change counter went from %s to %s); "
            "writing back this server's copy of %d keys",
            self.store.where,
            self._counter,
            snapshot.counter,
            len(copies),
        )
        self.store.restore(copies, self._counter or 0)

    def _take(self, snapshot: KeySnapshot) -> None:
        if self._by_digest and not snapshot.keys and snapshot.counter is not None:
            log.warning(
                "named keys: the last one was revoked; this server stays closed (only the settings' "
                "keys work): make another with `polyvox keys create`"
            )
        if not self.required and snapshot.counter is not None:
            self.required = True
            log.warning("named keys: a key was made in %s; this server now requires keys", self.store.where)
        self._by_digest = {key.digest: key for key in snapshot.keys}
        self._counter = snapshot.counter
        self._had_table |= snapshot.counter is not None

    def _why_not_vouched(self) -> str | None:
        """The key table vanished under a server that saw it, or a server that requires keys has none
        at all (`require_api_key` before the first `polyvox keys create`)."""
        if self.required and self._counter is None and (self._had_table or not self.settings_keys):
            return (
                f"the key store ({self.store.where}) holds no keys although this server requires them "
                "(it was emptied or lost, or none was made yet); requests are refused until keys are "
                "there (a replica holding them writes them back, or make one with `polyvox keys create`)"
            )
        return None

    def _set_problem(self, problem: str | None) -> None:
        if problem is not None and self.problem is None:
            log.error(
                "API keys cannot be checked: %s; every request without a settings key is refused 503", problem
            )
        elif problem is None and self.problem is not None:
            log.warning("API keys: the key store (%s) vouches for the keys again; serving", self.store.where)
        self.problem = problem


def _unreadable(store: KeyStore, exc: Exception) -> str:
    return f"the key store ({store.where}) cannot be read ({type(exc).__name__}: {exc})"
