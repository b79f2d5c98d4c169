"""`bench/served_compare.py` runs end to end on the CPU (tiny model, c=1, one short request a way): it
runs the engine alone in-process (`bench/engine_alone.py`), starts `polyvox serve` with the engine
in-thread and on two engine processes, drives each with `polyvox bench --stream`, and every way speaks
the same seeded audio, so its rows compare like for like and each served row is a share of the engine
alone's throughput.
Its third way, one engine process, is `polyvox serve`'s default: the same script code with other flags,
and the served section of gpu_bench's dry run (tests/bench/test_bench_scripts.py) serves it that way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_served_compare_measures_every_way_with_the_same_audio(tmp_path):
    out = tmp_path / "compare.json"
    command = [
        sys.executable, "bench/served_compare.py", "--concurrency", "1", "--requests-per-stream", "1",
        "--input", "A short line.", "--ways", "engine alone,in-thread,process DP=2", "--json", str(out),
    ]  # fmt: skip
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [row["way"] for row in rows] == ["engine alone", "in-thread", "process DP=2"]
    alone, served = rows[0], rows[1:]
    flags = [row["serve_command"] for row in served]
    assert "--no-engine-process" in flags[0]
    assert flags[1][flags[1].index("--data-parallel-size") + 1] == "2"
    # the engine alone is built from the servers' own model flags, with no server in front of it
    assert alone["command"][1].endswith("bench/engine_alone.py") and "--random-weights" in alone["command"]
    for row in rows:
        assert (row["mode"], row["concurrency"], row["requests"], row["errors"]) == ("stream", 1, 1, 0)
        assert row["throughput_audio_s_per_s"] > 0 and 0 < row["ttfa_p50_s"] <= row["ttfa_p95_s"]
        assert 0 <= row["streaming_viability"] <= 1 and len(row["load_avg_before"]) == 3
        # the engine's counters over the row: every 160 ms patch of the row's audio, and no other
        use = row["engine"]
        assert use["patches"] == round(row["audio_s_total"] / 0.16) and use["steps"] > 0
        assert use["mean_step_ms"] > 0 and 0 < use["busy"] <= 2
    # the engine alone was fed the very requests the servers were: the same text (the same audio length),
    # the same voice clip in the same prompts (as many prompt blocks)
    assert len({round(row["audio_s_total"], 3) for row in rows}) == 1 and rows[0]["audio_s_total"] > 0
    assert len({row["engine"]["prompt_blocks"] for row in rows}) == 1
    for row in served:
        share = row["throughput_audio_s_per_s"] / alone["throughput_audio_s_per_s"]
        assert row["engine_share"] == pytest.approx(share)
        assert row["engine"]["server_cpu_ms_per_request"] > 0  # the server process's CPU, counted
    # the table BENCHMARKS.md keeps: one line a row
    assert completed.stdout.count("| process DP=2 | 1 |") == 1
    assert completed.stdout.count("| engine alone | 1 |") == 1
