"""`DirectoryWatch`: without `state_url`, keeps a server's voices and lexicon in step with the other
servers sharing its voices directory and lexicon file (`api_server_count` processes, or several
`polyvox serve` on one machine). A thread stats `voices.json` and the lexicon file every
`state_sync_interval_s` and reloads what another server changed; requests that would otherwise miss a
voice re-check at once (`VoiceRegistry.refresh`)."""

from __future__ import annotations

import logging
import threading

import anyio
from fastapi import FastAPI

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
        self._thread = threading.Thread(target=self._run, name="polyvox-directory-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (blocking until a reload under way ends)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

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


def start(app: FastAPI) -> None:
    """Watch the voices directory and the lexicon file, unless `state_url` keeps them in step."""
    app.state.directory_watch = None
    if app.state.shared is not None:
        return
    settings = app.state.settings
    watch = DirectoryWatch(app.state.voices, app.state.lexicon, settings.state_sync_interval_s)
    watch.start()
    app.state.directory_watch = watch


async def stop(app: FastAPI) -> None:
    watch: DirectoryWatch | None = getattr(app.state, "directory_watch", None)
    if watch is not None:
        await anyio.to_thread.run_sync(watch.stop)
