"""Shutting down with engine processes: SIGTERM lets the requests in flight on every rank finish while new
ones get 503, then every engine process exits with the server; an API server killed with -9 leaves no
engine behind either (each notices its owner is gone). While an engine process starts, `/ready` names
its stages; with one rank, kill -9 of its engine makes `/ready` 503 until that process is restarted, and a
request sent meanwhile waits for it. SIGTERM to the whole process group (a service manager's) drains as
SIGTERM to the server does; a forkserver killed with -9 leaves no rank running beside their restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from engine.processes import alive, descendants, engine_pids, forkserver_of, frozen, kill9
from engine.serving import FLAGS, LONG, LONG_SEED, SPEECH, Stream, routed_per_rank, speak
from helpers.metrics import scrape, value
from helpers.ready_watch import watching_ready
from helpers.serve_process import free_port, polyvox_serve
from helpers.waiting import wait_until

VOICES = ("alloy", "echo")


def test_sigterm_drains_every_rank_then_no_engine_process_is_left(tmp_path):
    flags = (*FLAGS, "--voices-dir", str(tmp_path / "voices"), "--shutdown-grace-s", "120")
    with polyvox_serve(*flags) as (proc, url):
        engines = engine_pids(proc.pid)
        assert len(engines) == 2
        for voice in VOICES:  # frozen on first use, before anything is counted
            assert speak(url, "Warm up.", voice).status_code == 200
        answers: dict[int, httpx.Response] = {}

        def post(n: int, voice: str) -> None:
            body = {"input": LONG, "voice": voice, "response_format": "pcm", "seed": LONG_SEED}
            answers[n] = httpx.post(f"{url}{SPEECH}", json=body, timeout=120)

        # Four long requests at once: a voice's requests go to the rank that last served it only while
        # that rank has at most one more in flight (router.py), so both ranks get some. (The running
        # gauge is no witness: it drops to 0 between a request's pieces.)
        # The ranks are stopped while the drain is looked at (the tiny model makes the four in about 3 s),
        # so every request is in flight then on any machine.
        routed_before = routed_per_rank(scrape(url))
        threads = [threading.Thread(target=post, args=(n, voice)) for n, voice in enumerate(VOICES * 2)]

        def both_ranks_hold_some() -> bool:
            routed = routed_per_rank(scrape(url))
            return sum(routed) >= sum(routed_before) + len(threads) and all(
                now > before for now, before in zip(routed, routed_before, strict=True)
            )

        with frozen(engines):
            for thread in threads:
                thread.start()
            wait_until(both_ranks_hold_some, "every request is routed, to both ranks")
            proc.send_signal(signal.SIGTERM)
            wait_until(lambda: httpx.get(f"{url}/ready").status_code == 503, "/ready turns 503", timeout=10)
            refused = speak(url, "Too late.")
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
            assert all(thread.is_alive() for thread in threads)  # the drain waits for every one
        for thread in threads:
            thread.join(timeout=120)
        assert proc.wait(timeout=60) == 0
    assert [answer.status_code for answer in answers.values()] == [200] * len(threads)
    assert all(len(answer.content) > 24000 * 2 * 2 for answer in answers.values())
    wait_until(lambda: not any(alive(pid) for pid in engines), "every engine process exited", timeout=10)


def test_sigterm_to_the_whole_process_group_drains_as_sigterm_to_the_server_does(tmp_path):
    """A service manager (systemd's default, KillMode=control-group) sends SIGTERM to every process of
    the service at once. The engine ranks ignore it, and so does the forkserver they were forked from:
    had it died, every rank would have looked dead to the server (their exit is read from it). The
    stream in flight ends whole, the server exits 0, and no process of the group is left."""
    flags = (*FLAGS, "--voices-dir", str(tmp_path / "voices"), "--shutdown-grace-s", "120")
    with polyvox_serve(*flags, preexec=os.setsid) as (proc, url):  # its own process group
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        assert speak(url, "Warm up.").status_code == 200
        group = descendants(proc.pid)
        assert len(engine_pids(proc.pid)) == 2
        stream = Stream(LONG, seed=LONG_SEED)
        reader = threading.Thread(target=stream.run, args=(url,))
        reader.start()
        wait_until(lambda: len(stream.audio) > 0, "the stream has sent audio")
        os.killpg(proc.pid, signal.SIGTERM)
        reader.join(timeout=120)
        assert proc.wait(timeout=60) == 0
        output = proc.stdout.read()
    assert stream.ended == "done", (stream.ended, stream.code, output[-3000:])
    assert "restarted" not in output and "exited (exit code" not in output, output[-3000:]
    wait_until(lambda: not any(alive(pid) for pid in group), "every process of the group exited", timeout=10)


def test_ready_names_the_engine_process_stages_and_a_server_killed_with_9_leaves_no_engine(tmp_path):
    port = free_port()
    # the default CPU KV cache of the tiny model (2 GiB, 131,072 blocks): its engine core takes a while to
    # build, a stage /ready cannot miss (making the tiny weights takes a few milliseconds)
    flags = tuple("131072" if flag == "1024" else flag for flag in FLAGS)
    flags = (*flags, "--voices-dir", str(tmp_path / "voices"), "--data-parallel-size", "1")
    command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), *flags]
    url = f"http://127.0.0.1:{port}"
    stages: set[str] = set()
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    ready = httpx.get(f"{url}/ready")
                except httpx.TransportError:
                    continue
                if ready.status_code == 200:
                    break
                stages.add(ready.json()["error"]["message"].removeprefix("the engine is still starting: "))
                time.sleep(0.05)
            # the stages the engine process runs, not only the server's own "start the voxcpm2 engine"
            assert "build the engine core (KV cache, attention, compile)" in stages, stages
            (first,) = engine_pids(proc.pid)
            _kill_9_of_the_only_engine_is_waited_for_until_it_is_restarted_alone(url, first, tmp_path)
            (engine,) = engine_pids(proc.pid)
        finally:
            proc.kill()
    wait_until(lambda: not alive(engine), "the orphaned engine exited", timeout=10)


def _kill_9_of_the_only_engine_is_waited_for_until_it_is_restarted_alone(
    url: str, engine: int, tmp: Path
) -> None:
    """DP=1: with its one rank down nothing can serve, so `/ready` answers 503 until the rank's client
    has restarted that process, and a speech request sent meanwhile waits for it (not a 503, not a
    500); the engine as a whole is not rebuilt by the server's supervisor."""
    with watching_ready(url, tmp / "ready.jsonl") as ready:  # the rank is down for about 1.3 s
        kill9(engine)
        down = ready.wait_for(lambda answer: answer["http"] == 503, "/ready turns 503", timeout=10)
        sent = time.monotonic()
        waited = speak(url, "Nobody is up yet.")  # waits for the restarted process, within its deadline
        assert waited.status_code == 200, waited.text
        back = ready.wait_for(lambda a: a["t"] > down["t"] and a["http"] == 200, "it is back", timeout=120)
    answers = ready.answers()
    while_down = answers[answers.index(down) : answers.index(back)]
    assert {answer["error"]["code"] for answer in while_down} == {"engine_restarting"}, while_down
    assert sent < back["t"], "the request went out after the engine was back"
    assert speak(url, "Back again.").status_code == 200
    samples = scrape(url)
    assert value(samples, "polyvox_engine_rank_restarts_total", rank="0") == 1
    assert value(samples, "polyvox_engine_restarts_total") == 0


def test_a_forkserver_killed_with_9_leaves_no_rank_running_and_the_server_serves_again(tmp_path):
    """A rank's exit code is read from the forkserver that forked it, so a forkserver killed with -9
    reports every rank as exited though they run on: the server kills those (none is left holding its
    device beside the one started in its place) and starts them again from a new forkserver."""
    flags = (*FLAGS, "--voices-dir", str(tmp_path / "voices"))
    with polyvox_serve(*flags) as (proc, url):
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        assert speak(url, "Warm up.").status_code == 200
        first = engine_pids(proc.pid)
        kill9(forkserver_of(proc.pid))
        wait_until(lambda: not any(alive(pid) for pid in first), "the ranks it forked are gone")
        wait_until(
            lambda: (
                len(engine_pids(proc.pid)) == 2 and httpx.get(f"{url}/ready").json().get("status") == "ready"
            ),
            "two new ranks serve",
        )
        assert not set(engine_pids(proc.pid)) & set(first)
        assert speak(url, "Served again.").status_code == 200
