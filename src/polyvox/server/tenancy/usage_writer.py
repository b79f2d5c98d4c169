"""`UsageWriter`: usage rows written to the usage store off the request path, by one thread, so a
store that is slow or away (Redis frozen or down, a locked SQLite file) never holds a speech answer
longer than `WAIT_S`. A request's row waits (merged with the others of its key, model and day) for the
next write; its request waits for that write at most `WAIT_S`, and not at all while the store is known
to be away. Rows the store cannot take are kept here, at most `MAX_BACKLOG_ROWS` of them (one per key,
model and day: a long outage of a few keys stays small), and written once it takes them again, tried
every `RETRY_S`; a request whose row finds the backlog full is dropped and counted (`dropped`). The
outage is logged once, and once when what was kept is written."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from polyvox.server.tenancy.usage import METRICS, UsageRow, UsageStore

log = logging.getLogger(__name__)

WAIT_S = 0.5
RETRY_S = 1.0
MAX_BACKLOG_ROWS = 10_000

_RowKey = tuple[str, str, str]  # key name, model, date


class UsageWriter:
    def __init__(
        self,
        store: UsageStore,
        dropped: Callable[[UsageRow], None],
        max_rows: int | None = None,
        retry_s: float = RETRY_S,
    ):
        self.store = store
        self.max_rows = MAX_BACKLOG_ROWS if max_rows is None else max_rows
        self.retry_s = retry_s
        self._dropped = dropped
        self._changed = threading.Condition()
        self._pending: dict[_RowKey, UsageRow] = {}
        self._taken = 0  # writes started
        self._written = 0  # the last write that succeeded
        self._failing: str | None = None  # why the store could not be written; None: it can
        self._kept = 0  # requests kept while it could not
        self._thread: threading.Thread | None = None

    def add(self, row: UsageRow) -> None:
        """Queue `row` and wait (at most `WAIT_S`) until it is written, unless the store is known to be
        away. Blocking: call it from a thread."""
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="polyvox-usage-writer", daemon=True)
                self._thread.start()
            if not self._keep(row):
                return
            self._changed.notify_all()
            if self._failing is not None:
                self._kept += row.requests
                return
            write = self._taken + 1  # the write that will take it
            self._changed.wait_for(lambda: self._written >= write or self._failing is not None, WAIT_S)

    def _keep(self, row: UsageRow) -> bool:
        """Merge `row` into what waits to be written; False (counted) when the backlog is full."""
        key = (row.key_name, row.model, row.date)
        held = self._pending.get(key)
        if held is None:
            if len(self._pending) >= self.max_rows:
                self._dropped(row)
                return False
            self._pending[key] = row
        else:
            sums = {metric: getattr(held, metric) + getattr(row, metric) for metric in METRICS}
            self._pending[key] = dataclasses.replace(held, **sums)
        return True

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending))
                batch, self._pending = list(self._pending.values()), {}
                self._taken += 1
                write = self._taken
            try:
                self.store.add_rows(batch)
            except Exception as exc:  # the store away: keep the rows, try again
                self._failed(batch, f"{type(exc).__name__}: {exc}")
                time.sleep(self.retry_s)  # rows arriving meanwhile join the backlog
                continue
            with self._changed:
                kept, self._kept = self._kept, 0
                came_back = self._failing is not None
                self._failing = None
                self._written = write
                self._changed.notify_all()
            if came_back:
                log.info("usage: written to its store again, with the %d requests kept meanwhile", kept)

    def _failed(self, batch: list[UsageRow], reason: str) -> None:
        with self._changed:
            first = self._failing is None
            self._failing = reason
            if first:
                self._kept += sum(row.requests for row in batch)
            for row in batch:
                self._keep(row)
            self._changed.notify_all()
        if first:
            log.warning(
                "usage cannot be written to its store (%s): speech goes on, and up to %d usage rows "
                "are kept here to write when it returns (past that, polyvox_usage_dropped_total counts "
                "the requests lost)",
                reason,
                self.max_rows,
            )
