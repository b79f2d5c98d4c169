"""The soak script, briefly: concurrent clients against a real `polyvox serve` with the embedded voice,
every answer decoded; nothing lost or corrupted, and the server still ready afterwards. A few requests
per client are enough for that (16 in the basic mix, 32 in the full one), a count rather than seconds
of load, so a loaded machine takes longer but sends the same requests (each client's are drawn from its
own seeded generator): the long runs, where leaks would show, are the script's own job."""

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
        [sys.executable, str(SOAK), "--clients", "8", "--requests", "2", "--duration", "200", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    report = json.loads(result.stdout)
    assert report["requests"] == 16 and report["ok"] + report["refused_429"] == 16, report
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
        [sys.executable, str(SOAK), "--clients", "8", "--requests", "4", "--duration", "200", "--seed", "2",
         "--mix", "full", "--serve-args", serve_args],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert report["lost"] == 0 and report["corrupted"] == 0, report["failures"]
    assert report["requests"] == 32, report  # every request answered one way or another
    assert report["ok"] >= 4 and report["rejected_4xx"] >= 1 and report["cut_by_client"] >= 1, report
    assert report["engine_idle_after"] is True
    assert report["server_alive"] and report["server_exit_code"] == 0
    assert result.returncode == 0
