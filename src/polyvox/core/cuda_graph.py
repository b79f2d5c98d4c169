"""What the step's three sets of CUDA graphs (the LocDiT solve, the LM advance, the VAE decode) share:
one way to capture a graph, one memory pool per set, and one fallback policy.

The policy: any failure of a set's graph path, while capturing or replaying, and a replay that
disagrees with eager execution, is logged once as a warning, and that set runs eagerly from then on.
Serving eagerly is slower but correct; not serving is neither.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import torch

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE

log = logging.getLogger(__name__)

T = TypeVar("T")
WARM_UP_RUNS = 2  # on a side stream before capture, as PyTorch's CUDA graph notes ask


class GraphMismatch(RuntimeError):
    """A captured graph's replay disagrees with eager execution on the same inputs."""


class GraphSet:
    """One set of CUDA graphs: its memory pool, `capture_graph`, and the fallback (`guarded`, `disable`).

    `disabled` is True once the set has fallen back to eager execution.
    """

    def __init__(self, part: str) -> None:
        self.part = part  # what the graphs run, for the warning
        self.graph_pool: _POOL_HANDLE | None = None
        self.disabled = False

    def capture_graph(self, run: Callable[[], T]) -> tuple[torch.cuda.CUDAGraph, T, T]:
        """Warm `run` up on a side stream, then capture one call of it into a graph in this set's pool.

        Returns the graph, the captured call's output (its static tensors) and the last warm-up's
        output (what eager execution gave on the same inputs).
        """
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(WARM_UP_RUNS):
                eager = run()
        torch.cuda.current_stream().wait_stream(stream)
        if self.graph_pool is None:
            self.graph_pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.graph_pool):
            output = run()
        return graph, output, eager

    def guarded(self, call: Callable[[], T | None]) -> T | None:
        """`call()`, or None (the caller runs eagerly) once the set is disabled or if `call` fails."""
        if self.disabled:
            return None
        try:
            return call()
        except Exception as exc:  # any failure of the graph path: serve eagerly rather than not at all
            self.disable(str(exc) or type(exc).__name__)
            return None

    def disable(self, reason: str) -> None:
        log.warning("CUDA graph for %s failed (%s); it runs eagerly from now on", self.part, reason)
        self.disabled = True
