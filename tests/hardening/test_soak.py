"""The soak script, briefly: concurrent clients against a real `polyvox serve` with the embedded voice,
every answer decoded; nothing lost or corrupted, and the server still ready afterwards."""

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
        [sys.executable, str(SOAK), "--clients", "8", "--duration", "12", "--seed", "1"],
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
