"""`/ready` of `polyvox serve --api-server-count 2` (the embedded voice: each API process loads its own):
200 only once every API process on the port has started, whichever process is asked. One process
stopped (SIGSTOP) while it starts: the other, started, answers 503 `engine_not_ready` naming it, never
200 (it answered 200, and a load balancer sent requests that the stopped one's socket then took); once
it goes on, /ready turns 200 and each process serves speech."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from engine.processes import engine_pids
from helpers.connection_owners import through
from helpers.raw_http import speech_request, status_and_error
from helpers.serve_process import free_port

READY = b"GET /ready HTTP/1.1\r\nHost: polyvox\r\nConnection: close\r\n\r\n"


def _api_processes(launcher: subprocess.Popen) -> list[int]:
    deadline = time.monotonic() + 60
    while len(pids := engine_pids(launcher.pid)) < 2:
        assert launcher.poll() is None and time.monotonic() < deadline, "no two API processes"
        time.sleep(0.005)
    return pids


def _ready(url: str) -> httpx.Response | None:
    """/ready's answer, or None when the connection went to the stopped process (it waits there; half of
    them do, each costing the whole timeout) or an answer was slow (asked again either way)."""
    try:
        return httpx.get(f"{url}/ready", timeout=0.5)
    except httpx.TimeoutException:
        return None


def test_ready_waits_for_every_api_process(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), "--api-server-count", "2",
        "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning",
    ]  # fmt: skip
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as launcher:
        try:
            pids = _api_processes(launcher)
            stopped = pids[0]
            os.kill(stopped, signal.SIGSTOP)  # long before it has loaded its voice (imports take seconds)
            waiting_for_it = 0
            deadline = time.monotonic() + 120
            while waiting_for_it < 5:  # the other has started and says so, five times over
                assert time.monotonic() < deadline, "the started process never named the stopped one"
                answer = _ready(url)
                if answer is None or answer.status_code == 503 and "engine is still starting" in answer.text:
                    time.sleep(0.1)
                    continue
                assert answer.status_code == 503, f"/ready {answer.status_code} while one process is stopped"
                error = answer.json()["error"]
                assert error["code"] == "engine_not_ready" and "API server process" in error["message"]
                assert answer.headers["retry-after"] == "5"
                waiting_for_it += 1
            os.kill(stopped, signal.SIGCONT)
            deadline = time.monotonic() + 120
            while (answer := _ready(url)) is None or answer.status_code != 200:
                assert time.monotonic() < deadline, "/ready never turned 200 once both went on"
                time.sleep(0.1)
            for pid in pids:  # every process serves, and says it is ready
                ready = through(url, pid, pids, READY)
                assert ready.startswith(b"HTTP/1.1 200"), ready[:300]
                spoken = through(url, pid, pids, speech_request(f"Through {pid}."))
                assert spoken.startswith(b"HTTP/1.1 200"), status_and_error(spoken)
            launcher.send_signal(signal.SIGTERM)
            assert launcher.wait(timeout=60) == 0
            log = launcher.stdout.read()
        finally:
            for pid in engine_pids(launcher.pid) if launcher.poll() is None else []:
                os.kill(pid, signal.SIGCONT)
            if launcher.poll() is None:
                launcher.kill()
    assert "Traceback" not in log, log
