"""`ReplicaSync`: one replica's part in the state shared through Redis — the connection, the audio
cache there, and keeping the voices directory and the lexicon in step: a request that reads them first
catches up (`catch_up`: one round trip comparing Redis' version counters with those this replica last
synced, a sync only when they moved), a change made here is published before its answer is sent
(`publish`), and a background thread syncs every `interval_s` besides (and finds Redis back).

Which side wins at first contact: a replica that last synced with this same Redis (the epoch in
`<voices_dir>/.polyvox-state-epoch` matches) takes Redis' state as it is, so a voice deleted while it
was away stays deleted; a new replica, or any replica meeting a Redis that lost its data (a new
epoch), publishes what it holds first, which refills an emptied Redis from the replicas' copies.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from polyvox.state.audio_cache import RedisAudioCache
from polyvox.state.connection import StateConnection, StateUnavailable
from polyvox.state.lexicon_sync import LexiconMirror
from polyvox.state.mirror import DirectoryMirror
from polyvox.text.lexicon import Lexicon
from polyvox.voices.store import VoiceStore

log = logging.getLogger(__name__)

EPOCH_KEY = "polyvox:epoch"
EPOCH_FILE = ".polyvox-state-epoch"
TRIM_EVERY_S = 60.0


class ReplicaSync:
    def __init__(self, connection: StateConnection, interval_s: float):
        self.connection = connection
        self.interval_s = interval_s
        self.cache: RedisAudioCache | None = None
        self.mirror: DirectoryMirror | None = None
        self.lexicon: LexiconMirror | None = None
        self.epoch: str | None = None
        self._epoch_file: Path | None = None
        self._on_voices_synced: Callable[[bool], object] = lambda changed: None
        self._stopping = threading.Event()
        # one sync at a time: the thread's, a request's catch-up, a change's publication
        self._syncing = threading.RLock()
        self._thread: threading.Thread | None = None
        self._last_trim = 0.0

    def audio_cache(
        self, max_bytes: int, ttl_s: float | None, on_change: Callable[[int, int], None] | None = None
    ) -> RedisAudioCache:
        self.cache = RedisAudioCache(self.connection, max_bytes, ttl_s, on_change)
        return self.cache

    def start(
        self, store: VoiceStore | None, on_voices_synced: Callable[[bool], object], lexicon: Lexicon | None
    ) -> None:
        """Sync once (blocking, bounded by Redis' timeouts), then keep syncing in a thread.
        `on_voices_synced(changed)` follows each sync of the voices directory: whether it changed it."""
        if store is not None:
            self.mirror = DirectoryMirror(store, self.connection)
            self._epoch_file = store.root / EPOCH_FILE
        if lexicon is not None:
            self.lexicon = LexiconMirror(lexicon, self.connection)
        self._on_voices_synced = on_voices_synced
        self.sync_once()
        self._thread = threading.Thread(target=self._run, name="polyvox-state-sync", daemon=True)
        self._thread.start()

    async def catch_up(self) -> None:
        """Before a request reads voices, consents or the lexicon: sync now if another replica changed
        them since this one last synced (their version counters in Redis moved), so what a client
        changed through any replica is what it reads here. One round trip when nothing changed; nothing
        while Redis is unreachable (this replica's copies serve meanwhile)."""
        keys = [side.version_key for side in self._sides()]
        if not keys:
            return
        try:
            current = await self.connection.acall("state_version", lambda client: client.mget(keys))
        except StateUnavailable:
            return
        versions = [int(version or 0) for version in current]
        if versions != self._versions():
            await anyio.to_thread.run_sync(self._sync_now, versions)

    async def publish(self) -> None:
        """After a change made here succeeded, before its answer is sent: push it to Redis, so every
        replica's next `catch_up` sees it."""
        if not await anyio.to_thread.run_sync(self._sync_now):
            log.warning(
                "shared state: a change made here is not in Redis yet (%s); it reaches the other replicas "
                "when Redis returns",
                self.connection.reason or "unreachable",
            )

    def _sides(self) -> list[DirectoryMirror | LexiconMirror]:
        return [side for side in (self.mirror, self.lexicon) if side is not None]

    def _versions(self) -> list[int | None]:
        return [side.version for side in self._sides()]

    def _sync_now(self, unless_at: list[int] | None = None) -> bool:
        """Sync the voices directory and the lexicon now, unless they are already at the versions
        `unless_at` (another request's catch-up got there first); False when Redis could not be reached."""
        try:
            with self._syncing:
                if unless_at is None or self._versions() != unless_at:
                    self._sync_copies()
        except StateUnavailable:
            return False
        except Exception:
            log.exception("shared state: sync failed; retrying in %.1f s", self.interval_s)
        return True

    def stop(self) -> None:
        """Stop the thread and close the blocking client (the lifespan closes the asyncio one)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.connection.close()

    def sync_once(self) -> None:
        """The thread's round: find Redis (back), sync the copies, keep the cache's accounting."""
        if not self.connection.check():
            return
        try:
            self._sync_copies()
            if self.cache is not None:
                if time.monotonic() - self._last_trim > TRIM_EVERY_S:
                    self._last_trim = time.monotonic()
                    self.cache.trim_expired()
                self.cache.refresh()
        except StateUnavailable:
            pass  # counted and logged by the connection; the next round retries
        except Exception:
            log.exception("shared state: sync failed; retrying in %.1f s", self.interval_s)

    def _sync_copies(self) -> None:
        """Meet Redis' epoch, then push this replica's changes to the voices directory and the lexicon
        and take the others' (raises StateUnavailable)."""
        with self._syncing:
            self._meet_epoch()
            if self.mirror is not None:
                self._on_voices_synced(self.mirror.sync())
            if self.lexicon is not None:
                self.lexicon.sync()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.sync_once()

    def _meet_epoch(self) -> None:
        def current(client) -> str:
            client.set(EPOCH_KEY, secrets.token_hex(8), nx=True)
            return client.get(EPOCH_KEY).decode()

        epoch = self.connection.call("epoch", current)
        if epoch == self.epoch:
            return
        if not (self.epoch is None and self._saved_epoch() == epoch):
            if self.epoch is not None:
                log.warning("shared state: Redis lost its data (new epoch); publishing this replica's copies")
            for side in (self.mirror, self.lexicon):
                if side is not None:
                    side.forget_base()
        self.epoch = epoch
        if self._epoch_file is not None:
            try:
                self._epoch_file.write_text(epoch)
            except OSError as exc:
                log.warning("shared state: cannot record the epoch in %s (%s)", self._epoch_file, exc)

    def _saved_epoch(self) -> str | None:
        if self._epoch_file is None:
            return None
        try:
            return self._epoch_file.read_text().strip()
        except OSError:
            return None
