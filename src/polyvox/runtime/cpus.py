"""How many CPU cores this process may use: the one count that sizes thread pools across polyvox."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPU cores this process may run on: its affinity mask, not the machine's count."""
    if hasattr(os, "process_cpu_count"):  # Python 3.13+
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
