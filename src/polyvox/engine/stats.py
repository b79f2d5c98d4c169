"""What an engine reports of itself: its voice prompt cache's counters (`PromptCacheStats`), each
data-parallel rank's state (`EngineRank`), and the batching counters of several ranks as one
(`combined_stats`: totals summed, means weighted by steps). Plain data, light to import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from polyvox.core.stats import BatchingStats


@dataclass(frozen=True)
class PromptCacheStats:
    """An engine's voice prompt cache: clips encoded (misses) and prompts reused (hits)."""

    encodes: int = 0
    hits: int = 0


@dataclass(frozen=True)
class EngineRank:
    """One data-parallel rank of a batching engine, as `/ready` and `/metrics` see it: whether it is up,
    its counters (None while down), its restarts and the requests routed to it, by why it was chosen
    (the rank that last served the request's voice prompt, or the least loaded one), and the requests
    sent again elsewhere because it went away before they had audio, by why (`router.REROUTE_REASONS`)."""

    up: bool
    stats: BatchingStats | None
    restarts: int = 0
    routed_by_affinity: int = 0
    routed_by_load: int = 0
    rerouted: Mapping[str, int] = field(default_factory=dict)
    # The start-up stage an engine process said it is in while it starts (None once it serves). An engine
    # in this process names its stages in this process's `startup.STAGES` itself.
    stage: str | None = None


def combined_stats(ranks: list[BatchingStats | None]) -> BatchingStats | None:
    """Over the ranks that are up; None when none is."""
    up = [s for s in ranks if s is not None]
    if not up:
        return None
    if len(up) == 1:
        return up[0]
    queries = sum(s.prefix_cache_queries for s in up)
    hits = sum(s.prefix_cache_hits for s in up)
    steps = sum(s.steps for s in up)
    patches = sum(s.patches for s in up)
    return BatchingStats(
        running=sum(s.running for s in up),
        waiting=sum(s.waiting for s in up),
        kv_blocks_total=sum(s.kv_blocks_total for s in up),
        kv_blocks_used=sum(s.kv_blocks_used for s in up),
        kv_blocks_free=sum(s.kv_blocks_free for s in up),
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        prefix_cache_hit_rate=hits / queries if queries else 0.0,
        preemptions=sum(s.preemptions for s in up),
        steps=steps,
        patches=patches,
        last_batch_size=sum(s.last_batch_size for s in up),
        last_step_s=max(s.last_step_s for s in up),
        mean_batch_size=patches / max(steps, 1),
        mean_step_s=sum(s.mean_step_s * s.steps for s in up) / max(steps, 1),
    )
