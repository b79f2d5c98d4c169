"""`ReplicaSync`: one replica's part in the state shared through Redis — the connection, the audio
cache there, and a background thread that keeps the voices directory and the lexicon in step.

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
        self._on_voices_changed: Callable[[], object] = lambda: None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_trim = 0.0

    def audio_cache(
        self, max_bytes: int, ttl_s: float | None, on_change: Callable[[int, int], None] | None = None
    ) -> RedisAudioCache:
        self.cache = RedisAudioCache(self.connection, max_bytes, ttl_s, on_change)
        return self.cache

    def start(
        self, store: VoiceStore | None, on_voices_changed: Callable[[], object], lexicon: Lexicon | None
    ) -> None:
        """Sync once (blocking, bounded by Redis' timeouts), then keep syncing in a thread."""
        if store is not None:
            self.mirror = DirectoryMirror(store, self.connection)
            self._epoch_file = store.root / EPOCH_FILE
        if lexicon is not None:
            self.lexicon = LexiconMirror(lexicon, self.connection)
        self._on_voices_changed = on_voices_changed
        self.sync_once()
        self._thread = threading.Thread(target=self._run, name="polyvox-state-sync", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Sync now (a voice or the lexicon just changed here)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.connection.close()

    def sync_once(self) -> None:
        if not self.connection.check():
            return
        try:
            self._meet_epoch()
            if self.mirror is not None and self.mirror.sync():
                self._on_voices_changed()
            if self.lexicon is not None:
                self.lexicon.sync()
            if self.cache is not None:
                if time.monotonic() - self._last_trim > TRIM_EVERY_S:
                    self._last_trim = time.monotonic()
                    self.cache.trim_expired()
                self.cache.refresh()
        except StateUnavailable:
            pass  # counted and logged by the connection; the next round retries
        except Exception:
            log.exception("shared state: sync failed; retrying in %.1f s", self.interval_s)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if not self._stopping.is_set():
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
