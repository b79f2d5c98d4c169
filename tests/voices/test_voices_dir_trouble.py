"""A voices directory in trouble is seen where operators look. At start-up, a directory that cannot be used
or a `voices.json` that cannot be read stops `polyvox serve` with one line naming it (before, the
server ran without its registered voices after one warning). Broken while running, `voices.json` is
logged once, not on every check, `/ready` says `degraded` with the reason (and the metrics say so), the
voices read before keep speaking, and its repair is logged and clears it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.serve_process import free_port
from polyvox.backends.fake import FakeBackend
from voices.clips import wav_clip


def serve_process(voices_dir: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "polyvox.cli",
            "serve",
            "--port",
            str(free_port()),
            "--voices-dir",
            str(voices_dir),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
        check=False,
    )


def start_up_error(result: subprocess.CompletedProcess) -> str:
    """The one line a refused start ends with (no traceback)."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("polyvox serve: voices_dir = "), result.stderr
    return last


def test_a_malformed_voices_json_stops_serve_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "voices.json").write_text('{"voices": {"anna": {"audio": "a.wav"},}}')
    line = start_up_error(serve_process(tmp_path))
    assert str(tmp_path / "voices.json") in line and "line 1" in line and "fix the file" in line


def test_a_voices_dir_that_is_a_file_stops_serve_naming_it(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "voices"
    not_a_dir.write_text("a file")
    line = start_up_error(serve_process(not_a_dir))
    assert str(not_a_dir) in line and "not a directory" in line


def test_a_voices_dir_that_cannot_be_made_stops_serve_naming_it(tmp_path: Path) -> None:
    # Its parent is a regular file: no user can make it, root included (a directory of mode 0 would
    # stop only other users, and CI runs as root).
    (tmp_path / "a-file").write_text("not a directory")
    unusable = tmp_path / "a-file" / "voices"
    line = start_up_error(serve_process(unusable))
    assert str(unusable) in line and "Not a directory" in line and "readable and writable" in line


def ready(url: str) -> dict:
    answer = httpx.get(f"{url}/ready")
    assert answer.status_code == 200, answer.text
    return answer.json()


def voices_listed(url: str) -> list[str]:
    """The voice ids, as a request that re-checks voices.json first sees them."""
    return [voice["id"] for voice in httpx.get(f"{url}/v1/audio/voices").json()["voices"]]


def unreadable_gauge(url: str) -> str:
    metrics = httpx.get(f"{url}/metrics").text
    return next(
        line for line in metrics.splitlines() if line.startswith("polyvox_voices_registry_unreadable")
    )


def test_voices_json_broken_while_serving_is_logged_once_shown_by_ready_and_its_repair_too(
    serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polyvox.voices")
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path, state_sync_interval_s=0.05)
    form = {"name": "anna", "consent": "true"}
    assert httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio": wav_clip()}).status_code == 201
    assert ready(url)["status"] == "ready" and unreadable_gauge(url).endswith(" 0.0")
    registry = tmp_path / "voices.json"
    good = registry.read_text()

    registry.write_text(good.replace('"voices"', '"voices" oops', 1))
    for _ in range(20):  # every listing re-checks voices.json, as does the watch every 50 ms
        assert "anna" in voices_listed(url)
    answer = ready(url)
    assert answer["status"] == "degraded" and str(registry) in answer["voices_problem"]
    assert unreadable_gauge(url).endswith(" 1.0")
    spoken = httpx.post(f"{url}/v1/audio/speech", json={"input": "Still here.", "voice": "anna"})
    assert spoken.status_code == 200  # the voices read before it broke keep speaking
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and str(registry) in r.getMessage()]
    assert len(errors) == 1, [r.getMessage() for r in errors]

    registry.write_text(json.dumps(json.loads(good)))  # repaired (another write: a new file)
    assert "anna" in voices_listed(url)
    assert ready(url)["status"] == "ready" and "voices_problem" not in ready(url)
    assert unreadable_gauge(url).endswith(" 0.0")
    assert any("reads again" in r.getMessage() for r in caplog.records)
