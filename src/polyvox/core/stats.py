"""`BatchingStats`: a snapshot of one batching engine's counters, plain data that crosses to the API
side (in an engine process's messages) and reaches `/metrics`."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# The upper bounds of the step-time and batch-size histograms (`/metrics`:
# polyvox_engine_step_duration_seconds, polyvox_engine_step_batch_size); a last bucket counts the rest.
STEP_SECONDS_BOUNDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
BATCH_SIZE_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def bucket_of(bounds: tuple[float, ...], value: float) -> int:
    """The histogram bucket `value` falls in: the first bound at or above it, or the last (+Inf)."""
    return bisect.bisect_left(bounds, value)


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
    # Steps per bucket of STEP_SECONDS_BOUNDS (one more: past the last) and their total duration, and
    # steps per bucket of BATCH_SIZE_BOUNDS by the patches they made (their total is `patches`).
    step_s_counts: list[int] = field(default_factory=lambda: [0] * (len(STEP_SECONDS_BOUNDS) + 1))
    step_s_total: float = 0.0
    batch_size_counts: list[int] = field(default_factory=lambda: [0] * (len(BATCH_SIZE_BOUNDS) + 1))
