"""Engine ranks forked from the forkserver step with the PyTorch threads they were given (`--torch-threads`),
not with the count the forkserver's PyTorch had when it was imported there (here two, OMP_NUM_THREADS),
and so does a rank restarted after kill -9; each says so in its "ready" log line."""

from __future__ import annotations

import re
import signal

import httpx

from engine.processes import engine_pid_of_rank, kill9
from engine.serving import SPEECH
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until

FLAGS = (
    "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "1024",
    "--data-parallel-size", "2", "--torch-threads", "1", "--log-level", "info",
)  # fmt: skip
READY = re.compile(r"engine rank (\d) ready \(pid \d+, cpu, (\d+) PyTorch threads")


def test_every_rank_and_a_restarted_one_step_with_the_torch_threads_given(tmp_path):
    flags = (*FLAGS, "--voices-dir", str(tmp_path / "voices"))
    with polyvox_serve(*flags, env={"OMP_NUM_THREADS": "2"}) as (proc, url):
        # /ready answers 200 once one rank serves; a rank killed before its first start ends fails the start
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        kill9(engine_pid_of_rank(proc.pid, 0))
        wait_until(
            lambda: (
                value(scrape(url), "polyvox_engine_rank_restarts_total", rank="0") == 1
                and value(scrape(url), "polyvox_engine_up", rank="0") == 1
            ),
            "rank 0 is restarted and up",
        )
        body = {"input": "Both ranks serve.", "voice": "alloy", "response_format": "pcm"}
        assert httpx.post(f"{url}{SPEECH}", json=body, timeout=120).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        output = proc.stdout.read()
    ready = READY.findall(output)
    assert sorted(rank for rank, _ in ready) == ["0", "0", "1"], output[-3000:]
    assert {threads for _, threads in ready} == {"1"}, ready
