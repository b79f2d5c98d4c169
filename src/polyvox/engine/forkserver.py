"""What multiprocessing's forkserver imports before it forks any engine rank (engine/client.py's
`start_context` names this module): the engine (`process_main`, PyTorch with it), once for every rank,
with its objects frozen (runtime/heap.py); and, in the forkserver alone, SIGTERM ignored, as the ranks
ignore it. A service manager sends SIGTERM to every process of the service at once (systemd's default),
and a forkserver gone would make every rank it forked look dead to its owner, which reads their exit
codes from it. The forkserver still exits once its owner and every rank have (multiprocessing's own
pipe), or on SIGKILL."""

from __future__ import annotations

import signal
import sys
from types import FrameType

from polyvox.runtime.heap import startup_heap

# imported here so that no rank imports it again, with the collector off, and what it built frozen before
# any rank is forked (no rank's collector then writes to the pages it shares with this process)
with startup_heap():
    from polyvox.engine import process_main  # noqa: F401


def _imported_by_the_forkserver() -> bool:
    """Whether multiprocessing's forkserver is importing this module (its `main` preloads it), rather
    than any other process."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


if _imported_by_the_forkserver():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
