"""Waiting on a condition instead of sleeping a fixed time: a test asks again until what it waits for has
happened, and fails naming it only past a generous bound, so a loaded machine slows it but never fails it."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Return once `condition()` is truthy (asked every 50 ms); fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)
