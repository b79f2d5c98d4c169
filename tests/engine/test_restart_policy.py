"""The one restart policy every restarter uses (an engine process's client, the launcher's API processes,
the supervisor of the in-thread engine): a pause that doubles after each failed try up to its longest,
and starts over once the restarted thing has served."""

from __future__ import annotations

from polyvox.runtime.restart_policy import RestartBackoff


def test_the_pause_doubles_after_each_failed_try_up_to_the_longest() -> None:
    backoff = RestartBackoff(first_s=0.5, longest_s=30.0)
    assert [backoff.next_pause() for _ in range(9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_once_it_served_the_next_pause_is_the_first_again() -> None:
    backoff = RestartBackoff(first_s=0.25, longest_s=4.0)
    for _ in range(5):
        backoff.next_pause()
    backoff.reset()
    assert backoff.next_pause() == 0.25
    assert backoff.next_pause() == 0.5
