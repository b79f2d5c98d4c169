"""What a person sees of polyvox starting: `StartupError`, an expected reason it cannot start (a missing
or broken checkpoint, a malformed config file, an invalid setting, an engine that fails to start), whose
message the command line prints alone; and the start-up's stages (`stage`, `Progress`), each logged as it
starts and ends with its duration, the running one named by `/ready` while it answers 503."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

log = logging.getLogger("polyvox.startup")

PROGRESS_EVERY_S = 2.0  # often enough to show life on a terminal, rarely enough to stay readable


class StartupError(Exception):
    """An expected start-up failure; `str()` is the whole message a person reads."""


class StartupStages:
    """This process's stages running now, innermost last. Process-wide because the stages run in worker
    threads deep below the server (weights load in the back end, compiling in the engine core). An
    engine process has its own, and tells its clients its current one (`EngineRank.stage`)."""

    def __init__(self) -> None:
        self._running: list[str] = []
        self._lock = threading.Lock()

    @property
    def current(self) -> str | None:
        with self._lock:
            return self._running[-1] if self._running else None

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        log.info("start-up: %s ...", name)
        started = time.perf_counter()
        with self._lock:
            self._running.append(name)
        try:
            yield
        except BaseException:
            log.info("start-up: %s failed after %.1f s", name, time.perf_counter() - started)
            raise
        else:
            log.info("start-up: %s done in %.1f s", name, time.perf_counter() - started)
        finally:
            with self._lock:
                self._running.remove(name)


STAGES = StartupStages()


def stage(name: str) -> contextlib.AbstractContextManager[None]:
    """Log `name` as it starts and ends (with its duration); `/ready` names it while it runs."""
    return STAGES.stage(name)


class Progress:
    """Counts through a long stage, logged at most every `PROGRESS_EVERY_S` seconds and at the end
    ("load weights: 120/480 tensors (25 %)")."""

    def __init__(self, label: str, total: int, unit: str) -> None:
        self.label, self.total, self.unit = label, max(total, 0), unit
        self.done = 0
        self._logged_at = time.monotonic()

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self.done >= self.total or now - self._logged_at >= PROGRESS_EVERY_S:
            self._logged_at = now
            percent = 100 * self.done // self.total if self.total else 100
            log.info("start-up: %s: %d/%d %s (%d %%)", self.label, self.done, self.total, self.unit, percent)
