"""The API side of a VoxCPM server whose engine runs in processes of its own, random weights on the CPU,
imports no PyTorch: the launcher of `--api-server-count 2` and both its API processes map none of its
libraries (a second of CPU at each start and ~180 MiB each they would never use), the engine ranks do, and
the server speaks. Read from /proc, where a user sees each process's memory."""

from __future__ import annotations

import httpx

from engine.processes import engine_pid_of_rank, engine_pids, maps_torch
from engine.serving import FLAGS, speak
from helpers.audio import decode
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until


def test_the_launcher_and_its_api_processes_map_no_torch_and_the_ranks_do(tmp_path):
    flags = (*FLAGS, "--api-server-count", "2", "--voices-dir", str(tmp_path / "voices"))
    with polyvox_serve(*flags) as (proc, url):
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "both ranks serve")
        answer = speak(url, "No PyTorch up here.", response_format="wav")
        assert answer.status_code == 200
        samples, _ = decode(answer.content)
        assert samples.size > 0
        ranks = {engine_pid_of_rank(proc.pid, rank) for rank in range(2)}
        api = [pid for pid in engine_pids(proc.pid) if pid not in ranks]
        assert len(api) == 2
        for pid in (proc.pid, *api):
            assert maps_torch(pid) == [], pid
        assert all(maps_torch(pid) for pid in ranks)  # where the model is, PyTorch is
