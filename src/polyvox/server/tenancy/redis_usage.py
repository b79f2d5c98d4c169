"""Usage rows in Redis (`state_url`): one hash per day, a field per key, model and count, incremented
atomically (HINCRBYFLOAT in a MULTI), so every API process and replica adds to the same rows. Calls go
through the replica's `StateConnection` (its timeouts; failing at once while Redis is unreachable)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from polyvox.server.tenancy.usage import METRICS, UsageRow, UsageUnavailable
from polyvox.state.connection import StateConnection, StateUnavailable

_REDIS_PREFIX = "polyvox:usage:"
_SEP = "\t"


class RedisUsage:
    def __init__(self, connection: StateConnection):
        self.connection = connection

    @classmethod
    def from_url(cls, url: str) -> RedisUsage:
        connection = StateConnection(url)
        connection.check()
        return cls(connection)

    def add_rows(self, rows: Sequence[UsageRow]) -> None:
        def add(client) -> None:
            with client.pipeline(transaction=True) as pipe:
                for row in rows:
                    for metric in METRICS:
                        field = _SEP.join((row.key_name, row.model, metric))
                        pipe.hincrbyfloat(_REDIS_PREFIX + row.date, field, float(getattr(row, metric)))
                pipe.execute()

        try:
            self.connection.call("usage", add)
        except StateUnavailable as exc:
            raise UsageUnavailable(str(exc)) from exc

    def rows(self, start: dt.date, end: dt.date, key_name: str | None) -> list[UsageRow]:
        days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]

        def read(client) -> list[dict[bytes, bytes]]:
            with client.pipeline(transaction=False) as pipe:
                for day in days:
                    pipe.hgetall(_REDIS_PREFIX + day.isoformat())
                return pipe.execute()

        try:
            found = self.connection.call("usage", read)
        except StateUnavailable as exc:
            raise UsageUnavailable(str(exc)) from exc
        rows = []
        for day, fields in zip(days, found, strict=True):
            counts: dict[tuple[str, str], dict[str, float]] = {}
            for raw_field, value in fields.items():
                name, model, metric = raw_field.decode().split(_SEP)
                if key_name is None or name == key_name:
                    counts.setdefault((name, model), {})[metric] = float(value)
            for (name, model), metric_values in sorted(counts.items()):
                rows.append(
                    UsageRow(
                        name,
                        model,
                        day.isoformat(),
                        requests=round(metric_values.get("requests", 0)),
                        input_characters=round(metric_values.get("input_characters", 0)),
                        audio_seconds=metric_values.get("audio_seconds", 0.0),
                        cache_hits=round(metric_values.get("cache_hits", 0)),
                    )
                )
        return rows
