"""`BatchingStats`: a snapshot of one batching engine's counters, plain data that crosses to the API
side (in an engine process's messages) and reaches `/metrics`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class BatchingStats:
    """A snapshot of the engine for metrics; counters are totals since start."""

    running: int
    waiting: int
    kv_blocks_total: int
    kv_blocks_used: int
    kv_blocks_free: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    prefix_cache_hit_rate: float
    preemptions: int
    steps: int
    patches: int
    last_batch_size: int
    last_step_s: float
    mean_batch_size: float
    mean_step_s: float
