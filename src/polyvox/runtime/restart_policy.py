"""`RestartBackoff`: the one restart policy, for whatever is started again when it dies (an engine
process, by its client; an API process, by the launcher; the in-thread engine's runtime, by the
supervisor). The pause before the next try is `first_s`, doubled after each failed try up to
`longest_s`, and `first_s` again once the thing served (`reset()`).

The pauses are tenacity's `wait_exponential`. Tenacity's retry loop (`AsyncRetrying`) is not used: it
retries one call until the call returns, while two of the three restarts are loops of another shape:
the launcher's try is an API process's whole life (the pause resets when that life was long, not when
a call returned) and its wait ends early when the launcher stops; the supervisor's try is a wait on the
engine's readiness, in which the engine may come back by itself. Each keeps its loop and asks this
object for pauses.
"""

from __future__ import annotations

from tenacity import RetryCallState, Retrying, wait_exponential

FIRST_S = 0.5  # the pause before the first try of starting a dead thing again
LONGEST_S = 30.0  # the longest pause between tries


class RestartBackoff:
    def __init__(self, first_s: float = FIRST_S, longest_s: float = LONGEST_S) -> None:
        self.first_s = first_s
        self.longest_s = longest_s
        self._wait = wait_exponential(multiplier=first_s, max=longest_s)
        self._tries = RetryCallState(Retrying(), None, (), {})  # counts the failed tries: attempt_number

    def next_pause(self) -> float:
        """The pause before the next try; each call counts one more failed try."""
        pause = self._wait(self._tries)
        self._tries.attempt_number += 1
        return pause

    def reset(self) -> None:
        """It served: the next pause is `first_s` again."""
        self._tries.attempt_number = 1
