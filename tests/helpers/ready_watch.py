"""`/ready` watched from a process of its own: it asks again 10 ms after each answer, over one connection,
and notes every answer that differs from the one before (its HTTP status as `http`, when it came as `t`
on the clock of `time.monotonic()`, beside its body's fields). A state that lasts a fraction of a second
(a rank of the tiny random model is back about 0.2 s after it died) is seen even while the test's own
process runs dozens of client threads that would keep a thread of its own from asking in time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.waiting import wait_until

_POLL = """
import json, sys, time, httpx
url, out = sys.argv[1], sys.argv[2]
last = None
with httpx.Client(timeout=30) as client, open(out, "a") as notes:
    while True:
        try:
            response = client.get(url + "/ready")
            try:
                answer = {"http": response.status_code, **response.json()}
            except ValueError:  # not JSON: noted as it came
                answer = {"http": response.status_code, "text": response.text[:200]}
        except httpx.TransportError as exc:
            answer = {"http": None, "transport_error": type(exc).__name__}
        if answer != last:
            notes.write(json.dumps({**answer, "t": time.monotonic()}) + "\\n")
            notes.flush()
            last = answer
        time.sleep(0.01)
"""


class ReadyWatch:
    def __init__(self, notes: Path) -> None:
        self.notes = notes

    def answers(self) -> list[dict]:
        """Every answer that differed from the one before, in order."""
        text = self.notes.read_text() if self.notes.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def first(self, match: Callable[[dict], object]) -> dict | None:
        return next((answer for answer in self.answers() if match(answer)), None)

    def wait_for(self, match: Callable[[dict], object], what: str, timeout: float = 60.0) -> dict:
        """The first answer `match` accepts, once the watcher has seen one."""
        wait_until(lambda: self.first(match), what, timeout)
        answer = self.first(match)
        assert answer is not None
        return answer


@contextmanager
def watching_ready(url: str, notes: Path) -> Iterator[ReadyWatch]:
    """Watch `url`'s /ready from a child process until the block ends (its first answer noted already)."""
    process = subprocess.Popen([sys.executable, "-c", _POLL, url, str(notes)])
    try:
        watch = ReadyWatch(notes)
        wait_until(watch.answers, "the watcher has its first answer")
        yield watch
    finally:
        process.kill()
        process.wait()
