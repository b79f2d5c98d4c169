"""`bench/host_overhead.py` runs end to end (a dry run: batch 1 and 8, a few steps), so its table in
BENCHMARKS.md can always be measured again: the real step loop with the model's outputs precomputed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("schedule", "inputs", "outputs", "serialise", "send")


def test_host_overhead_dry_run_reports_every_row_and_phase(tmp_path):
    out = tmp_path / "host.json"
    command = [sys.executable, "bench/host_overhead.py", "--batch", "1,8", "--mixed", "8", "--arrivals", "2"]
    command += ["--steps", "4", "--wire", "chunks,frame", "--device-ms", "1", "--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [(r["workload"].split()[0], r["wire"], r["batch"]) for r in runs] == [
        (workload, wire, batch)
        for wire in ("chunks", "frame")
        for workload, batch in (("decode", 1), ("decode", 8), ("mixed", 8))
    ]
    for run in runs:
        assert run["steps"] == 4
        assert all(run[f"{phase}_ms"] >= 0 for phase in PHASES)
        assert run["host_ms_mean"] > 0 and run["wall_ms_p50"] > 0
        if run["workload"] == "decode":  # steady decode: every stream gets its patch in every step
            assert run["mean_rows"] == run["batch"]
        else:  # two streams end and two arrive each step, so the batch stays about its size
            assert 6 <= run["mean_rows"] <= 10


def test_host_overhead_refuses_an_unknown_wire_format():
    command = [sys.executable, "bench/host_overhead.py", "--wire", "pickle"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--wire takes chunks, views, frame" in done.stderr
