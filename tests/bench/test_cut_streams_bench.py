"""bench/cut_streams.py runs end to end (a few cuts instead of hundreds), so the benchmark behind
BENCHMARKS.md's cut-stream table keeps working: it reads the server process and its /metrics before
and after, and the cuts leave no encoder open."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("piper")

ROOT = Path(__file__).resolve().parents[2]


def test_cut_streams_reports_the_server_before_and_after_the_cuts(tmp_path):
    out = tmp_path / "cuts.json"
    command = [sys.executable, "bench/cut_streams.py", "--formats", "opus", "--cuts", "4", "--parallel", "2",
               "--settle", "0.5", "--json", str(out)]  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["format"], row["streams"], row["cut"]) == ("opus", 4, True)
    for reading in ("before", "after_cuts", "after_idle"):
        assert row[reading]["rss_mib"] > 0 and row[reading]["threads"] > 0 and row[reading]["open_files"] > 0
    assert row["after_idle"]["encoders_open"] == 0
