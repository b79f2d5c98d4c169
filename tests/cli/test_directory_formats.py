"""The voices directory and the audio cache carry a format version (`format.json`), checked by a real
`polyvox serve` at start: a directory from before format versions is migrated (the file written, what
it held kept), and one a newer polyvox wrote is refused in one line naming the directory and both
formats."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.serve_process import polyvox_serve

pytest.importorskip("polyvox.backends.embedded")

VOICES_CURRENT, CACHE_CURRENT = 1, 2  # the formats this release writes (CHANGELOG.md, "Upgrading")


def refused(*flags: str) -> str:
    """`polyvox serve` with `flags`, expected to refuse to start: its one-line message."""
    env = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"}
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "serve", "--port", "0", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("polyvox serve: ")]
    return line


def written_by_a_newer_polyvox(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "format.json").write_text(json.dumps({"format": 7, "written_by": "polyvox 9.0.0"}))


def test_a_voices_directory_written_by_a_newer_polyvox_is_refused(tmp_path: Path):
    voices = tmp_path / "voices"
    written_by_a_newer_polyvox(voices)
    message = refused("--voices-dir", str(voices), "--no-cache-enabled")
    assert f"voices_dir {voices} has format 7 (written by polyvox 9.0.0)" in message
    assert f"reads format {VOICES_CURRENT} at most" in message
    assert json.loads((voices / "format.json").read_text())["format"] == 7  # left as it was


def test_a_cache_written_by_a_newer_polyvox_is_refused(tmp_path: Path):
    cache = tmp_path / "cache"
    written_by_a_newer_polyvox(cache)
    message = refused("--voices-dir", str(tmp_path / "voices"), "--cache-enabled", "--cache-dir", str(cache))
    assert f"cache_dir {cache} has format 7" in message and f"reads format {CACHE_CURRENT} at most" in message


def speak(url: str) -> httpx.Response:
    body = {"input": "Kept across the upgrade.", "response_format": "wav"}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response


def serve_once(voices: Path, cache: Path, check) -> None:
    flags = ("--voices-dir", str(voices), "--cache-enabled", "--cache-dir", str(cache))
    with polyvox_serve(*flags) as (proc, url):
        check(url)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_directories_from_before_format_versions_are_migrated_and_keep_what_they_held(tmp_path: Path):
    voices, cache = tmp_path / "voices", tmp_path / "cache"
    made = {}
    serve_once(voices, cache, lambda url: made.update(first=speak(url)))
    assert made["first"].headers["x-cache"] == "MISS"
    registry = voices / "voices.json"
    registry.write_text(json.dumps({"voices": {}}))
    # as an earlier polyvox left them: no format file
    for directory in (voices, cache):
        (directory / "format.json").unlink()
    before = registry.read_bytes()
    later = {}
    serve_once(voices, cache, lambda url: later.update(again=speak(url)))
    assert later["again"].headers["x-cache"] == "HIT"  # the cache's entries survived the migration
    assert later["again"].content == made["first"].content
    assert registry.read_bytes() == before
    for directory, current in ((voices, VOICES_CURRENT), (cache, CACHE_CURRENT)):
        assert json.loads((directory / "format.json").read_text())["format"] == current
