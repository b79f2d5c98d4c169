"""bench/text_bench.py runs end to end and reports each set of sentences it times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("wetext")


def test_the_text_bench_times_every_sentence_set(tmp_path):
    out = tmp_path / "text.json"
    command = [sys.executable, "bench/text_bench.py", "--repeat", "1", "--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=120)
    result = json.loads(out.read_text())
    assert result["first_call_ms"] > 0
    for name in ("en", "zh", "long"):
        run = result[name]
        assert run["sentences"] > 0
        assert 0 < run["median_ms"] <= run["p95_ms"] <= run["worst_ms"]
