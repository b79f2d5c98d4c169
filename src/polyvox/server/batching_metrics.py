"""Prometheus view of the batching engine, read at scrape time from the back end's `stats()`:
running and waiting requests, batch size, KV blocks, prefix-cache hits, step time and preemptions.
Back ends that do not batch (the embedded voice) have none and export nothing here."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from polyvox.backends.base import Backend


class BatchingStatsCollector(Collector):
    def __init__(self, backend: Backend):
        self.backend = backend

    def collect(self) -> Iterator[Metric]:
        stats = self.backend.stats()
        if stats is None:
            return
        gauges = {
            "running_requests": ("Requests in the engine's running batch.", stats.running),
            "waiting_requests": ("Requests waiting for admission to the batch.", stats.waiting),
            "kv_blocks_used": ("KV-cache blocks held by requests.", stats.kv_blocks_used),
            "kv_blocks_free": ("KV-cache blocks free.", stats.kv_blocks_free),
            "batch_size": ("Requests that produced a patch in the last step.", stats.last_batch_size),
            "batch_size_mean": ("Mean requests per step since start.", stats.mean_batch_size),
            "step_seconds": ("Duration of the last engine step.", stats.last_step_s),
            "step_seconds_mean": ("Mean engine step duration since start.", stats.mean_step_s),
            "prefix_cache_hit_rate": (
                "Share of prompt blocks found in the prefix cache.",
                stats.prefix_cache_hit_rate,
            ),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(f"polyvox_engine_{name}", doc, value=value)
        counters = {
            "steps": ("Backend steps run.", stats.steps),
            "patches": ("160 ms patches generated.", stats.patches),
            "preemptions": ("Requests preempted under KV-cache pressure.", stats.preemptions),
            "prefix_cache_queries": (
                "Prompt blocks looked up in the prefix cache.",
                stats.prefix_cache_queries,
            ),
            "prefix_cache_hits": ("Prompt blocks found in the prefix cache.", stats.prefix_cache_hits),
        }
        for name, (doc, value) in counters.items():
            yield CounterMetricFamily(f"polyvox_engine_{name}", doc, value=value)
