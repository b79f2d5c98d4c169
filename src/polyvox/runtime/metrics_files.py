"""Whether this process keeps its Prometheus metrics in files that other processes share: prometheus_client's
multiprocess mode, on while `PROMETHEUS_MULTIPROC_DIR` names a directory. The launcher of several API
processes on one port sets it before they import prometheus_client, so a scrape of any one of them can
sum the counts of all."""

from __future__ import annotations

import os
from collections.abc import Sequence

from prometheus_client import Counter, values

MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def shared_metrics_dir() -> str | None:
    """The directory of the shared metric files, or None when this process's metrics are its own."""
    directory = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if directory is None:
        return None
    if values.ValueClass is values.MutexValue:  # chosen once, when prometheus_client was imported
        raise RuntimeError(
            f"{MULTIPROC_DIR_VARIABLE} was set after prometheus_client was imported: this process's "
            "metrics are in memory, where no other process's scrape can add them up"
        )
    return directory


def shared_counter(name: str, documentation: str, labelnames: Sequence[str]) -> Counter | None:
    """For a count each process keeps in its own objects but a scrape of any process must sum: in
    multiprocess mode a counter in the shared files (in no registry: `/metrics` reads the files), whose
    collector then leaves the family out; None otherwise, when the collector reports the count itself."""
    if shared_metrics_dir() is None:
        return None
    return Counter(name, documentation, labelnames, registry=None)
