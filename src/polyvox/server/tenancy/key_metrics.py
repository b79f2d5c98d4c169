"""Per-key counters on /metrics, labelled by key name: named keys' names, `(settings)` for the keys of
the settings and `(anonymous)` on an open server, so the label's values are the configured keys (a
bounded set). With several API processes on one port they live in the shared metric files."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from polyvox.runtime.metrics_files import shared_metrics_dir
from polyvox.server.tenancy.usage import UsageRow


class KeyMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry if shared_metrics_dir() is None else None  # None: the shared files
        self.requests = Counter(
            "polyvox_key_requests", "Speech requests served, per key.", ["key"], registry=r
        )
        self.input_characters = Counter(
            "polyvox_key_input_characters",
            "Input characters of speech requests, per key.",
            ["key"],
            registry=r,
        )
        self.audio_seconds = Counter(
            "polyvox_key_audio_seconds", "Seconds of audio answered, per key.", ["key"], registry=r
        )
        self.cache_hits = Counter(
            "polyvox_key_cache_hits",
            "Speech requests answered from the audio cache, per key.",
            ["key"],
            registry=r,
        )
        self.usage_dropped = Counter(
            "polyvox_usage_dropped",
            "Speech requests whose usage was lost: its store was away and the rows kept to write "
            "when it returns had reached their bound.",
            ["key"],
            registry=r,
        )
        self.rate_limited = Counter(
            "polyvox_key_rate_limited",
            "Requests refused by a key's limit (requests, characters or streams).",
            ["key", "limit"],
            registry=r,
        )

    def record(self, row: UsageRow) -> None:
        self.requests.labels(key=row.key_name).inc(row.requests)
        self.input_characters.labels(key=row.key_name).inc(row.input_characters)
        self.audio_seconds.labels(key=row.key_name).inc(row.audio_seconds)
        self.cache_hits.labels(key=row.key_name).inc(row.cache_hits)

    def dropped(self, row: UsageRow) -> None:
        self.usage_dropped.labels(key=row.key_name).inc(row.requests)

    def limited(self, key_name: str, which: str) -> None:
        self.rate_limited.labels(key=key_name, limit=which).inc()
