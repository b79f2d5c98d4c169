"""`Router`: which data-parallel rank serves a request. The one that will serve it soonest (fewest
requests sent to it and not finished: its running and waiting ones), unless the rank that last served
the request's voice prompt (a reference clip's content hash, or a voice design's text) is within
`AFFINITY_MARGIN` of that: then that rank, whose prefix cache likely still holds the prompt's blocks.
A long input's later pieces go where its first piece went, while that rank is up: they share its voice
prompt and follow one another, and pieces that moved between ranks with the loads would split one
stream's fate (a rank that dies mid-stream) over both.
How often affinity decided is counted (for each request, not each piece), so the prefix-cache hit
rate it buys can be measured, and how often a request was lost, to be sent again, because the rank it was
sent to died before it had any audio (`rerouted`, by the rank it left and why); with several API processes on
one port (each routing its own requests) also in prometheus_client's shared files, so `/metrics` can sum
the counts of all."""

from __future__ import annotations

import itertools
from collections import OrderedDict

from polyvox.engine.request import EngineRequest
from polyvox.runtime.metrics_files import shared_counter

# The voice's rank is chosen while its load is at most the least load plus a quarter of it, and never
# less than one request more: with equal loads a voice stays where its prefix is; a rank with clearly
# more work is passed over.
AFFINITY_MARGIN = 0.25
AFFINITY_MIN_SLACK = 1
REMEMBERED_VOICES = 4096
REMEMBERED_REQUESTS = 4096  # long inputs being spoken whose next pieces follow their first
ROUTED_REQUESTS = "polyvox_engine_routed_requests"
ROUTED_REQUESTS_HELP = (
    "Requests sent to the engine rank, by why it was chosen: affinity (it last served the "
    "request's voice prompt) or load (it was the least loaded)."
)
REROUTED_REQUESTS = "polyvox_engine_rerouted_requests"
REROUTED_REQUESTS_HELP = (
    "Engine requests (a whole input, or one piece of a long one) lost because the rank they were on went "
    "away before any of their audio came back, each sent again to a live rank up to its third send, by "
    "that rank and why: rank_died "
    "(it died holding them) or send_failed (it was found gone as they were sent)."
)
REROUTE_REASONS = ("rank_died", "send_failed")


def voice_key(request: EngineRequest) -> str | None:
    """What a request's prompt shares with others of the same voice; None for a plain request."""
    if request.reference is not None:
        return f"clip:{request.reference.content_hash}"
    if request.instructions and request.instructions.strip():
        return f"design:{request.instructions.strip()}"
    return None


class NoRankUp(RuntimeError):
    """Every rank is down."""


class Router:
    def __init__(self, ranks: int, affinity: bool = True) -> None:
        self.ranks = ranks
        self.affinity = affinity  # off: least load alone (to measure what affinity buys)
        # per rank: requests sent there because it last served their voice, or because it was least loaded
        self.by_affinity = [0] * ranks
        self.by_load = [0] * ranks
        self.rerouted = [dict.fromkeys(REROUTE_REASONS, 0) for _ in range(ranks)]  # by the rank they left
        self._voices: OrderedDict[str, int] = OrderedDict()
        self._turn = itertools.count()
        self._requests: OrderedDict[str, int] = OrderedDict()
        # Several API processes on one port route with a Router each: /metrics sums their shared counts.
        self._shared_counts = shared_counter(ROUTED_REQUESTS, ROUTED_REQUESTS_HELP, ["rank", "reason"])
        self._shared_reroutes = shared_counter(REROUTED_REQUESTS, REROUTED_REQUESTS_HELP, ["rank", "reason"])
        if self._shared_counts is not None:
            for rank, reason in itertools.product(range(ranks), ("affinity", "load")):
                self._shared_counts.labels(rank=str(rank), reason=reason)  # every series, from zero
        if self._shared_reroutes is not None:
            for rank, reason in itertools.product(range(ranks), REROUTE_REASONS):
                self._shared_reroutes.labels(rank=str(rank), reason=reason)

    def route(self, loads: list[int | None], piece: EngineRequest) -> int:
        """The rank for `piece` (of a long input, or a whole one): its request's rank when an earlier
        piece went there and it is up, else `choose`'s."""
        request = piece.request_id or None
        rank = self._requests.get(request) if request is not None else None
        if request is not None and rank is not None and loads[rank] is not None:
            self._requests.move_to_end(request)
            return rank
        rank = self.choose(loads, voice_key(piece))
        if request is not None:
            _remember(self._requests, request, rank, REMEMBERED_REQUESTS)
        return rank

    def choose(self, loads: list[int | None], voice: str | None) -> int:
        """`loads[rank]`: its requests in flight, None while it is down."""
        up = [rank for rank, load in enumerate(loads) if load is not None]
        if not up:
            raise NoRankUp("no engine rank is up")
        least = min(loads[rank] or 0 for rank in up)
        tied = [rank for rank in up if loads[rank] == least]
        choice = tied[next(self._turn) % len(tied)]  # equal loads: take turns
        held = self._voices.get(voice) if voice is not None and self.affinity else None
        slack = max(AFFINITY_MIN_SLACK, AFFINITY_MARGIN * least)
        if held is not None and (load := loads[held]) is not None and load <= least + slack:
            choice = held
        self._count(choice, by_affinity=held is not None and choice == held)
        if voice is not None:
            _remember(self._voices, voice, choice, REMEMBERED_VOICES)
        return choice

    def rerouted_from(self, rank: int, reason: str) -> None:
        """A request that had no audio yet was lost with `rank` (`reason`: one of REROUTE_REASONS), to be
        sent again (`backends/rerun.py`); where it goes next is routed, and counted, as any request."""
        self.rerouted[rank][reason] += 1
        if self._shared_reroutes is not None:
            self._shared_reroutes.labels(rank=str(rank), reason=reason).inc()

    def _count(self, rank: int, by_affinity: bool) -> None:
        (self.by_affinity if by_affinity else self.by_load)[rank] += 1
        if self._shared_counts is not None:
            self._shared_counts.labels(rank=str(rank), reason="affinity" if by_affinity else "load").inc()


def _remember(memory: OrderedDict[str, int], key: str, rank: int, limit: int) -> None:
    """`key`'s rank, most recent last; the oldest forgotten past `limit`."""
    memory[key] = rank
    memory.move_to_end(key)
    while len(memory) > limit:
        memory.popitem(last=False)
