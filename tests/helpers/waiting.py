"""Waiting on a condition instead of sleeping a fixed time: a test asks again until what it waits for has
happened, and fails naming it only past a generous bound, so a loaded machine slows it but never fails it."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], object], what: str, timeout_s: float = 30.0, every_s: float = 0.05
) -> None:
    """Return once `condition()` is truthy; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(every_s)
