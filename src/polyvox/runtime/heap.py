"""The garbage collector and what a process builds before it serves (its imports, PyTorch's above all,
its settings and app, a loaded model). Python's collector makes a full pass over every object it
tracks each time those that survived its younger passes have grown by a quarter: a start-up that imports
PyTorch makes several over a growing heap (about a fifth of an engine's import, BENCHMARKS.md), and a
server pays a pass over all it built, now and then, while it serves. `startup_heap` keeps the collector
off while a process starts and then freezes what it built (`gc.freeze`: left out of every later pass,
and out of the pages a forked child would otherwise copy when a pass writes to them), as vLLM's servers
freeze theirs once started. The few thousand objects of import-time garbage are frozen with the rest
rather than found by a full pass of their own."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def startup_heap() -> Iterator[None]:
    """The collector off for the block, then everything the process holds frozen and the collector back
    as it was (a block inside another leaves it off for the outer one)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze_heap()
        if enabled:
            gc.enable()


def freeze_heap() -> None:
    """Everything the process holds now out of the collector's passes (a model just loaded, an app just
    built): it lives as long as the process, and a pass over it finds nothing."""
    gc.freeze()
