"""`DirectoryWatch`: without `state_url`, keeps a server's voices and lexicon in step with the other
servers sharing its voices directory and lexicon file (`api_server_count` processes, or several
`polyvox serve` on one machine). A request that reads them first catches up (`catch_up`: a stat of
`voices.json` and of the lexicon file, off the event loop, and a reload of what another server
changed), and a thread does the same every `state_sync_interval_s`. A change needs no publishing: it
is written to the shared files, under their locks, before its answer is sent."""

from __future__ import annotations

import logging
import threading

import anyio

from polyvox.text.lexicon import Lexicon, LexiconError
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


class DirectoryWatch:
    def __init__(self, registry: VoiceRegistry, lexicon: Lexicon | None, interval_s: float):
        self.registry = registry
        self.lexicon = lexicon
        self.interval_s = interval_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="polyvox-directory-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (blocking until a reload under way ends)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    async def catch_up(self) -> None:
        """Before a request reads voices, consents or the lexicon: reload what another server sharing
        the files changed, so a voice it made speaks here and a voice it deleted does not. (Consents
        are read from their file on every request anyway.)"""
        await anyio.to_thread.run_sync(self.check_once)

    async def publish(self) -> None:
        """Nothing to do: a change made here is in the shared files before its answer is sent."""

    def check_once(self) -> None:
        """Reload the voices and the lexicon where another server changed their files."""
        try:
            if self.registry.refresh():
                log.debug("voices: voices.json changed by another server; reloaded")
        except Exception:  # a clip or the disk failing must not end the watch
            log.exception("voices: reloading voices.json failed; retrying when it changes again")
        if self.lexicon is None:
            return
        try:
            if self.lexicon.reload_if_changed():
                log.debug("lexicon: %s changed by another server; reloaded", self.lexicon.path)
        except LexiconError as exc:
            log.error("lexicon: %s; keeping the entries loaded before", exc)

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.check_once()
