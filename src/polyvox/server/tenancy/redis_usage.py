"""Usage rows in Redis (`state_url`): one hash per day, a field per key, model and count, incremented
atomically (HINCRBYFLOAT in a MULTI), so every API process and replica adds to the same rows."""

from __future__ import annotations

import datetime as dt

import redis

from polyvox.server.tenancy.usage import METRICS, UsageRow

_REDIS_PREFIX = "polyvox:usage:"
_SEP = "\t"


class RedisUsage:
    def __init__(self, client: redis.Redis):
        self.client = client

    @classmethod
    def from_url(cls, url: str) -> RedisUsage:
        return cls(redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=3.0))

    def add(self, row: UsageRow) -> None:
        day = _REDIS_PREFIX + row.date
        with self.client.pipeline(transaction=True) as pipe:
            for metric in METRICS:
                field = _SEP.join((row.key_name, row.model, metric))
                pipe.hincrbyfloat(day, field, float(getattr(row, metric)))
            pipe.execute()

    def rows(self, start: dt.date, end: dt.date, key_name: str | None) -> list[UsageRow]:
        days = [start + dt.timedelta(days=n) for n in range((end - start).days + 1)]
        with self.client.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(_REDIS_PREFIX + day.isoformat())
            found = pipe.execute()
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
