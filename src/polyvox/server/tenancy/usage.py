"""Usage per key, per model, per day (UTC): requests, input characters, audio seconds, cache hits.
Kept where every API process and replica adds to the same rows: an SQLite file in the voices directory
(`usage.sqlite3`; SQLite serialises writers across processes), or Redis with `state_url`
(`redis_usage.py`; `service.open_usage_store` picks the one the settings name). Blocking calls: the
server makes them from a thread, and writes through `usage_writer.UsageWriter`, off the request path."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

USAGE_FILE = "usage.sqlite3"
METRICS = ("requests", "input_characters", "audio_seconds", "cache_hits")


@dataclass(frozen=True)
class UsageRow:
    key_name: str
    model: str
    date: str  # YYYY-MM-DD, UTC
    requests: int = 0
    input_characters: int = 0
    audio_seconds: float = 0.0
    cache_hits: int = 0


class UsageUnavailable(Exception):
    """The usage store cannot be read or written now; `str()` says where and why."""


class UsageStore(Protocol):
    def add_rows(self, rows: Sequence[UsageRow]) -> None:
        """Add each row's counts to the stored row of its key, model and date, all or none;
        UsageUnavailable when the store cannot be written now."""

    def rows(self, start: dt.date, end: dt.date, key_name: str | None) -> list[UsageRow]:
        """Rows from `start` to `end` (both included), of one key or (None) all; UsageUnavailable when
        the store cannot be read now."""


class SqliteUsage:
    def __init__(self, path: Path):
        self.path = path
        # One connection for the process, used under a lock: a connection per thread (sqlite3's default
        # rule) kept the file open once per worker thread that ever recorded usage, a leak of two fds each.
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        with self._lock, self._db as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS usage (key_name TEXT, model TEXT, date TEXT, requests INTEGER,"
                " input_characters INTEGER, audio_seconds REAL, cache_hits INTEGER,"
                " PRIMARY KEY (key_name, model, date))"
            )

    def add_rows(self, rows: Sequence[UsageRow]) -> None:
        try:
            with self._lock, self._db as db:
                db.executemany(
                    "INSERT INTO usage VALUES (?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (key_name, model, date) DO UPDATE"
                    " SET requests = requests + excluded.requests,"
                    " input_characters = input_characters + excluded.input_characters,"
                    " audio_seconds = audio_seconds + excluded.audio_seconds,"
                    " cache_hits = cache_hits + excluded.cache_hits",
                    [(row.key_name, row.model, row.date, row.requests, row.input_characters,
                      row.audio_seconds, row.cache_hits) for row in rows],
                )  # fmt: skip
        except sqlite3.Error as exc:
            raise UsageUnavailable(f"{self.path}: {exc}") from exc

    def rows(self, start: dt.date, end: dt.date, key_name: str | None) -> list[UsageRow]:
        query = "SELECT * FROM usage WHERE date >= ? AND date <= ?"
        args = [start.isoformat(), end.isoformat()]
        if key_name is not None:
            query += " AND key_name = ?"
            args.append(key_name)
        try:
            with self._lock:
                found = self._db.execute(query + " ORDER BY date, key_name, model", args).fetchall()
        except sqlite3.Error as exc:
            raise UsageUnavailable(f"{self.path}: {exc}") from exc
        return [UsageRow(*row) for row in found]


def day_of(when: float) -> str:
    return dt.datetime.fromtimestamp(when, dt.UTC).date().isoformat()
