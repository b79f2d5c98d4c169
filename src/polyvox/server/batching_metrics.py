"""Prometheus view of the batching engine, read at scrape time from the back end's `engine_ranks()`,
each series labelled by data-parallel `rank`: running and waiting requests, batch size, KV blocks,
prefix-cache hits, step time and preemptions (the step time and batch size also as histograms of every
step since the rank started); whether the rank is up, its restarts, the requests
routed to it (`reason`: affinity, to the rank that last served the voice's prompt, or load) and those
sent again elsewhere because it went away before they had audio (`reason`: rank_died, send_failed).
Back ends that do not batch (the embedded voice) have no ranks and export nothing here.

With several API processes on one port, every one of them reads the same engine counters from the
ranks, so this collector reports them as the scraping process sees them; only the routed and re-routed
requests, counted by each process's own `Router`, are left to the shared files that `/metrics` sums."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from polyvox.backends.base import Backend
from polyvox.core.stats import BATCH_SIZE_BOUNDS, STEP_SECONDS_BOUNDS
from polyvox.engine.router import (
    REROUTE_REASONS,
    REROUTED_REQUESTS,
    REROUTED_REQUESTS_HELP,
    ROUTED_REQUESTS,
    ROUTED_REQUESTS_HELP,
)
from polyvox.runtime.metrics_files import shared_metrics_dir

if TYPE_CHECKING:  # the batching engine imports torch, which an API server for the embedded voice never needs
    from polyvox.core.core import BatchingStats

GAUGES: dict[str, str] = {
    "running_requests": "Requests in the engine's running batch.",
    "waiting_requests": "Requests waiting for admission to the batch.",
    "kv_blocks_used": "KV-cache blocks held by requests.",
    "kv_blocks_free": "KV-cache blocks free.",
    "batch_size": "Requests that produced a patch in the last step.",
    "batch_size_mean": "Mean requests per step since start.",
    "step_seconds": "Duration of the last engine step.",
    "step_seconds_mean": "Mean engine step duration since start.",
    "prefix_cache_hit_rate": "Share of prompt blocks found in the prefix cache.",
}
COUNTERS: dict[str, str] = {
    "steps": "Backend steps run.",
    "patches": "160 ms patches generated.",
    "preemptions": "Requests preempted under KV-cache pressure.",
    "prefix_cache_queries": "Prompt blocks looked up in the prefix cache.",
    "prefix_cache_hits": "Prompt blocks found in the prefix cache.",
}


def _buckets(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """Prometheus' cumulative buckets ("le" and the count at or below it) from counts per bucket."""
    cumulative, total = [], 0
    for bound, count in zip((*map(str, map(float, bounds)), "+Inf"), counts, strict=True):
        total += count
        cumulative.append((bound, float(total)))
    return cumulative


def _values(stats: BatchingStats) -> dict[str, float]:
    return {
        "running_requests": stats.running,
        "waiting_requests": stats.waiting,
        "kv_blocks_used": stats.kv_blocks_used,
        "kv_blocks_free": stats.kv_blocks_free,
        "batch_size": stats.last_batch_size,
        "batch_size_mean": stats.mean_batch_size,
        "step_seconds": stats.last_step_s,
        "step_seconds_mean": stats.mean_step_s,
        "prefix_cache_hit_rate": stats.prefix_cache_hit_rate,
        "steps": stats.steps,
        "patches": stats.patches,
        "preemptions": stats.preemptions,
        "prefix_cache_queries": stats.prefix_cache_queries,
        "prefix_cache_hits": stats.prefix_cache_hits,
    }


class BatchingStatsCollector(Collector):
    def __init__(self, backend: Backend):
        self.backend = backend
        self.reports_routed = shared_metrics_dir() is None

    def collect(self) -> Iterator[Metric]:
        ranks = self.backend.engine_ranks()
        if not ranks:
            return
        up = GaugeMetricFamily("polyvox_engine_up", "1 while the engine rank serves.", labels=["rank"])
        restarts = CounterMetricFamily(
            "polyvox_engine_rank_restarts", "Times the engine rank's process was restarted.", labels=["rank"]
        )
        routed = CounterMetricFamily(ROUTED_REQUESTS, ROUTED_REQUESTS_HELP, labels=["rank", "reason"])
        rerouted = CounterMetricFamily(REROUTED_REQUESTS, REROUTED_REQUESTS_HELP, labels=["rank", "reason"])
        gauges = {
            name: GaugeMetricFamily(f"polyvox_engine_{name}", doc, labels=["rank"])
            for name, doc in GAUGES.items()
        }
        counters = {
            name: CounterMetricFamily(f"polyvox_engine_{name}", doc, labels=["rank"])
            for name, doc in COUNTERS.items()
        }
        step_time = HistogramMetricFamily(
            "polyvox_engine_step_duration_seconds", "Duration of each engine step.", labels=["rank"]
        )
        batch_size = HistogramMetricFamily(
            "polyvox_engine_step_batch_size", "Requests that produced a patch in each step.", labels=["rank"]
        )
        for rank, state in enumerate(ranks):
            label = str(rank)
            up.add_metric([label], 1.0 if state.up else 0.0)
            restarts.add_metric([label], state.restarts)
            routed.add_metric([label, "affinity"], state.routed_by_affinity)
            routed.add_metric([label, "load"], state.routed_by_load)
            for reason in REROUTE_REASONS:
                rerouted.add_metric([label, reason], state.rerouted.get(reason, 0))
            if state.stats is None:
                continue
            stats = state.stats
            step_time.add_metric(
                [label], _buckets(STEP_SECONDS_BOUNDS, stats.step_s_counts), stats.step_s_total
            )
            batch_size.add_metric(
                [label], _buckets(BATCH_SIZE_BOUNDS, stats.batch_size_counts), stats.patches
            )
            for name, value in _values(state.stats).items():
                family = gauges.get(name) or counters[name]
                family.add_metric([label], value)
        yield up
        yield restarts
        if self.reports_routed:
            yield routed
            yield rerouted
        yield from gauges.values()
        yield from counters.values()
        yield step_time
        yield batch_size
