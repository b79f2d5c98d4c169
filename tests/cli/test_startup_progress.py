"""`polyvox serve` starting as a person watches it: a real process with the tiny random VoxCPM2 on the
CPU. `/health` answers as soon as the port is open while `/ready` is 503 naming the stage in progress;
the log shows each stage start and end with its duration, uvicorn's lines in the same format; with
`--log-format json` every line is a JSON object and a speech request's lines carry its request id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from helpers.serve_process import free_port, polyvox_serve

TINY = ("--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "256")
STAGE_START = re.compile(r"start-up: (.+) \.\.\.$")
STAGE_END = re.compile(r"start-up: (.+) done in (\d+\.\d) s$")
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR|DEBUG) [\w.]+:")


class Watched:
    """What a watcher saw: /ready's first answer once /health answered, and the whole log."""

    def __init__(self, first_health: int, first_ready: httpx.Response, log: str):
        self.first_health = first_health
        self.first_ready = first_ready
        self.log = log


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Watched:
    tmp = tmp_path_factory.mktemp("watch")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ("serve", "--port", str(port), "--voices-dir", str(tmp / "voices"), *TINY)
    with (tmp / "log").open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "polyvox.cli", *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        first_health = first_ready = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if first_health is None:
                    first_health = httpx.get(f"{url}/health").status_code
                    first_ready = httpx.get(f"{url}/ready")
                if httpx.get(f"{url}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.05)
        assert first_ready is not None, (tmp / "log").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return Watched(first_health, first_ready, (tmp / "log").read_text())


def test_health_answers_at_once_while_ready_names_the_stage(watched: Watched) -> None:
    assert watched.first_health == 200
    assert watched.first_ready.status_code == 503, watched.log
    error = watched.first_ready.json()["error"]
    assert error["code"] == "engine_not_ready"
    started = {m.group(1) for line in watched.log.splitlines() if (m := STAGE_START.search(line))}
    stage = error["message"].removeprefix("the engine is still starting: ")
    assert stage in started, (error["message"], started)  # a stage the log shows, by the same name


def test_the_log_shows_each_stage_start_and_end_with_its_duration(watched: Watched) -> None:
    lines = watched.log.splitlines()
    started = [m.group(1) for line in lines if (m := STAGE_START.search(line))]
    ended = {m.group(1): float(m.group(2)) for line in lines if (m := STAGE_END.search(line))}
    assert set(started) == set(ended), watched.log
    for expected in (
        "start the voxcpm2 engine",
        "make random tiny weights on cpu",
        "load the registered voices",
    ):
        assert expected in ended, watched.log
    assert any(name.startswith("build the engine core") for name in ended)
    # the engine's stage holds the stages inside it
    assert ended["start the voxcpm2 engine"] >= ended["make random tiny weights on cpu"]


def test_polyvox_and_uvicorn_lines_share_one_format(watched: Watched) -> None:
    lines = [line for line in watched.log.splitlines() if line.strip()]
    uvicorn = [line for line in lines if " uvicorn." in line]
    access = [line for line in lines if " polyvox.access:" in line]  # uvicorn's own access line is off
    assert any('"GET /health HTTP/1.1" 200' in line for line in access), watched.log
    assert any("Application startup complete" in line for line in uvicorn), watched.log
    for line in lines:
        assert TEXT_LINE.match(line), line


@pytest.fixture(scope="module")
def json_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    """(the X-Request-Id of one speech request, every log line of the server that answered it)."""
    voices = tmp_path_factory.mktemp("json-voices")
    with polyvox_serve(*TINY, "--log-format", "json", "--voices-dir", str(voices), "--no-cache-enabled") as (
        proc,
        url,
    ):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        response = client.audio.speech.with_raw_response.create(
            model="tts-1", voice="alloy", input="Hello there.", response_format="wav"
        )
        assert response.http_response.status_code == 200
        assert response.content[:4] == b"RIFF"
        request_id = response.headers["x-request-id"]
        proc.terminate()
        output, _ = proc.communicate(timeout=30)
    yield request_id, [line for line in output.splitlines() if line.strip()]


def test_json_log_lines_are_json_objects(json_run: tuple[str, list[str]]) -> None:
    _, lines = json_run
    assert len(lines) > 5
    for line in lines:
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= entry.keys(), line


def test_a_speech_request_s_lines_carry_its_request_id(json_run: tuple[str, list[str]]) -> None:
    request_id, lines = json_run
    entries = [json.loads(line) for line in lines]
    mine = [e for e in entries if e.get("request_id") == request_id]
    loggers = {e["logger"] for e in mine}
    assert "polyvox.access" in loggers, mine  # the access line of POST /v1/audio/speech
    assert any(e["logger"].startswith("polyvox.") for e in mine), mine
    access = next(e for e in mine if e["logger"] == "polyvox.access")
    assert access["path"] == "/v1/audio/speech" and access["status"] == 200
    # the id names this request only: the start-up lines carry none, each /ready probe its own
    assert not any(e.get("request_id") for e in entries if "start-up" in e["message"])
    probes = [e for e in entries if e.get("path") == "/ready"]
    assert probes and all(e.get("request_id") not in (None, request_id) for e in probes)
    assert all(e.get("path") in (None, "/v1/audio/speech") for e in mine)


def test_the_log_format_setting_is_refused_when_unknown(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "serve", "--log-format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "invalid choice: 'xml'" in result.stderr
