"""The soak script, briefly: concurrent clients against a real `polyvox serve` with the embedded voice,
every answer decoded; nothing lost or corrupted, and the server still ready afterwards. A few seconds
of load are enough for that (about 15 requests in the basic mix, 75 in the full one on two cores): the
long runs, where leaks would show, are the script's own job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("piper")

SOAK = Path(__file__).parents[2] / "bench" / "soak.py"


def test_short_soak_loses_and_corrupts_nothing() -> None:
    result = subprocess.run(
        [sys.executable, str(SOAK), "--clients", "8", "--duration", "6", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    report = json.loads(result.stdout)
    assert report["ok"] >= 8, report
    assert report["lost"] == 0 and report["corrupted"] == 0, report["failures"]
    assert report["server_alive"] and report["server_exit_code"] == 0
    assert report["rss_mb_peak"] is not None
    assert result.returncode == 0


def test_short_full_mix_soak_against_the_batching_engine() -> None:
    """Cloning, SSE, streams cut by the client and bad requests mixed in, against the VoxCPM2 batching
    engine (tiny random weights, no audio cache, so every request reaches the engine): nothing lost,
    bad requests refused in OpenAI's shape, and the engine holds nothing afterwards."""
    serve_args = "--random-weights tiny --device cpu --no-cache-enabled"
    result = subprocess.run(
        [sys.executable, str(SOAK), "--clients", "8", "--duration", "5", "--seed", "2", "--mix", "full",
         "--serve-args", serve_args],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["corrupted"] == 0, report["failures"]
    assert report["ok"] >= 4 and report["rejected_4xx"] >= 1 and report["cut_by_client"] >= 1, report
    assert report["engine_idle_after"] is True
    assert report["server_alive"] and report["server_exit_code"] == 0
    assert result.returncode == 0
