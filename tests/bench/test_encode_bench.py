"""The encoding benchmarks run end to end, so their tables in BENCHMARKS.md can always be measured
again: `bench/encode_bench.py` (a dry run: four streams, short windows) and `bench/encode_served.py`
(a real server in a child process, two listeners, one-second windows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"]


def test_encode_bench_dry_run_measures_every_format_and_its_audio_decodes_to_what_was_encoded(tmp_path):
    out = tmp_path / "encode.json"
    command = [sys.executable, "bench/encode_bench.py", "--dry-run", "--threads", "1,2", "--lock-check"]
    command += ["--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    assert [(run["format"], run["threads"]) for run in report["runs"]] == [
        (fmt, threads) for fmt in FORMATS for threads in (1, 2)
    ]
    assert [check["call_ms"] > 0 for check in report["lock_check"]] == [True, True, True]
    for run in report["runs"]:
        assert run["chunks"] > 0 and run["chunks_per_s"] > 0 and run["direct_chunks_per_s"] > 0
        assert run["real_time_streams"] == int(run["chunks_per_s"] * 0.16)
        # stream 0's bytes, decoded, last as long as the 160 ms chunks it pushed (codec padding aside)
        assert run["encoded_s"] > 0
        assert run["decoded_s"] == pytest.approx(run["encoded_s"], abs=0.1)


def test_encode_bench_measures_streams_shifted_in_pitch_at_their_length(tmp_path):
    out = tmp_path / "pitch.json"
    command = [sys.executable, "bench/encode_bench.py", "--dry-run", "--formats", "pcm,mp3", "--threads", "1"]
    command += ["--pitch", "5", "--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [(run["format"], run["pitch"]) for run in runs] == [("pcm", 5.0), ("mp3", 5.0)]
    for run in runs:  # shifted, not stretched: as long as what was pushed
        assert run["chunks"] > 0 and run["decoded_s"] == pytest.approx(run["encoded_s"], abs=0.1)


def test_encode_served_measures_what_a_served_chunk_costs_the_server(tmp_path):
    out = tmp_path / "served.json"
    command = [sys.executable, "bench/encode_served.py", "--formats", "pcm,mp3", "--streams", "2"]
    command += ["--seconds", "1", "--warmup", "0.5", "--json", str(out)]
    subprocess.run(command, cwd=ROOT, check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [run["format"] for run in runs] == ["pcm", "mp3"]
    for run in runs:
        assert run["chunks_per_s"] > 0 and run["server_cpu_ms_per_chunk"] > 0
