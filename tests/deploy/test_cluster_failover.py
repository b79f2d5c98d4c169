"""Under load through nginx (24 clients sending until the test has seen enough) to three embedded-voice
replicas: SIGTERM to one loses no request (it drains, nginx sends new work elsewhere), and kill -9
of another fails at most the requests it held at that moment, while every request sent after it
succeeds. The counts are printed (`pytest -s`)."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass

import httpx
import pytest

from deploy.cluster import cluster, eventually
from helpers.metrics import scrape, value

pytest.importorskip("polyvox.backends.embedded")
pytestmark = pytest.mark.timeout(600)

CLIENTS = 24
AFTER_KILL = 24  # requests sent after the kill -9 (and answered) before the load stops
TEXT = "Every request is answered."


@dataclass
class Outcome:
    started: float
    ended: float
    ok: bool
    detail: str = ""


class Load:
    """`CLIENTS` threads sending speech requests (cache bypassed) through nginx, one after another each,
    until `stop()`: the load lasts as long as the test needs it, however slow the machine."""

    def __init__(self, url: str):
        self.url = url
        self.outcomes: list[Outcome] = []
        self.issued = 0
        self._stopping = False
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, daemon=True) for _ in range(CLIENTS)]

    def done(self) -> int:
        with self._lock:
            return len(self.outcomes)

    def answered_after(self, moment: float) -> int:
        with self._lock:
            return sum(o.started > moment for o in self.outcomes)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True

    def _client(self) -> None:
        body = {"model": "tts-1", "voice": "nova", "input": TEXT, "response_format": "pcm"}
        with httpx.Client(timeout=120) as client:
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    self.issued += 1
                started = time.monotonic()
                try:
                    response = client.post(
                        f"{self.url}/v1/audio/speech", json=body, headers={"Cache-Control": "no-cache"}
                    )
                    ok = response.status_code == 200 and len(response.content) > 9_600
                    detail = "" if ok else f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    ok, detail = False, f"{type(exc).__name__}: {exc}"
                with self._lock:
                    self.outcomes.append(Outcome(started, time.monotonic(), ok, detail))


def held(url: str) -> int:
    """Requests a replica is running or queueing, from its own metrics."""
    samples = scrape(url)
    return int(value(samples, "polyvox_requests_in_flight") + value(samples, "polyvox_queue_depth"))


def test_sigterm_loses_nothing_and_kill_9_only_what_the_replica_held(tmp_path):
    with cluster(tmp_path, []) as running:
        drained, killed, survivor = running.replicas
        load = Load(running.url)
        for thread in load.threads:
            thread.start()

        eventually(lambda: load.done() >= 16, "16 answers before the SIGTERM", timeout_s=180)
        # 24 clients never stop sending, and nginx gives each of three replicas its share (least_conn)
        eventually(lambda: held(drained.url) > 0, "the replica to drain holding requests", timeout_s=300)
        term_sent = time.monotonic()
        drained.proc.send_signal(signal.SIGTERM)
        assert drained.proc.wait(timeout=60) == 0, drained.output()  # drained, then exited cleanly
        # the same 24 clients now share two replicas: the one to kill holds some of their requests
        eventually(lambda: held(killed.url) > 0, "the replica to kill holding requests", timeout_s=300)
        read_at = time.monotonic()
        held_at_kill = held(killed.url)
        killed.proc.send_signal(signal.SIGKILL)
        kill_sent = time.monotonic()
        killed.proc.wait(timeout=10)

        # the requests sent after the kill, to see them all succeed
        eventually(lambda: load.answered_after(kill_sent) >= AFTER_KILL, "answers after the kill", 300)
        load.stop()
        for thread in load.threads:
            thread.join(timeout=300)
        assert not any(thread.is_alive() for thread in load.threads)
        assert survivor.proc.poll() is None  # it took the rest of the load

    outcomes = load.outcomes
    failed = [o for o in outcomes if not o.ok]
    around_term = [o for o in outcomes if term_sent <= o.ended < kill_sent]
    at_kill = [o for o in outcomes if o.started < kill_sent <= o.ended]
    after_kill = [o for o in outcomes if o.started > kill_sent]
    print(
        f"\n{len(outcomes)} requests: {len(outcomes) - len(failed)} answered, {len(failed)} failed; "
        f"{len(around_term)} finished between SIGTERM and kill -9 (failed: "
        f"{sum(not o.ok for o in around_term)}); {len(at_kill)} in flight at the kill, "
        f"{held_at_kill} of them held by the killed replica when its metrics were read; "
        f"{len(after_kill)} sent after the kill (failed: {sum(not o.ok for o in after_kill)})"
    )
    assert len(outcomes) == load.issued  # every request sent has its outcome
    assert len(after_kill) >= AFTER_KILL
    assert all(o.ok for o in around_term), [o.detail for o in around_term if not o.ok]
    assert all(o.ok for o in after_kill), [o.detail for o in after_kill if not o.ok]
    # Every failure was in flight at the kill. The killed replica held `held_at_kill` a moment
    # before; a request reaching it in that moment is in flight too, hence the bound's second term.
    assert all(o in at_kill for o in failed), [o.detail for o in failed]
    arrived_since_read = [o for o in at_kill if o.started >= read_at]
    assert len(failed) <= held_at_kill + len(arrived_since_read)
