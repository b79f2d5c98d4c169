"""`polyvox serve --freeze-voices-at-start`: a real process with the tiny random VoxCPM2 on the CPU
freezes every builtin voice as a start-up stage. While it does, `/ready` is 503 naming that stage; the
log shows the stage start, its progress counts and its end with a duration; once ready, every builtin
voice has been frozen and a speech request for one freezes nothing more."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx
import openai
import pytest

from helpers.serve_process import free_port
from polyvox.voices.builtin import load_builtin_voices

# Short freezes (8 patches a voice instead of 75): how long each prompt is has no part in what is checked.
FLAGS = (
    "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--freeze-voices-at-start",
    "--voice-freeze-max-patches", "8",
)  # fmt: skip
STAGE = "freeze the builtin voices"
FREEZES = re.compile(r"^polyvox_voice_builtin_freezes_total (\S+)$", re.MULTILINE)
PROGRESS = re.compile(rf"start-up: {STAGE}: (\d+)/(\d+) voices")


@dataclass
class Run:
    ready_messages: list[str]  # every 503 message /ready gave while the server started
    freezes_when_ready: float
    freezes_after_speech: float
    log: str


def _freezes(url: str) -> float:
    match = FREEZES.search(httpx.get(f"{url}/metrics").text)
    assert match, "polyvox_voice_builtin_freezes_total missing from /metrics"
    return float(match.group(1))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    tmp = tmp_path_factory.mktemp("freeze-at-start")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = ("serve", "--port", str(port), "--voices-dir", str(tmp / "voices"), *FLAGS)
    with (tmp / "log").open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "polyvox.cli", *flags], stdout=out, stderr=subprocess.STDOUT
        )
    messages: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp / "log").read_text()
            assert time.monotonic() < deadline, (tmp / "log").read_text()
            try:
                ready = httpx.get(f"{url}/ready")
            except httpx.TransportError:
                time.sleep(0.05)
                continue  # not listening yet
            if ready.status_code == 200:
                break
            messages.append(ready.json()["error"]["message"])
            time.sleep(0.05)
        when_ready = _freezes(url)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        speech = client.audio.speech.with_raw_response.create(
            model="tts-1", voice="alloy", input="Hello there.", response_format="wav"
        )
        assert speech.http_response.status_code == 200 and speech.content[:4] == b"RIFF"
        after = _freezes(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return Run(messages, when_ready, after, (tmp / "log").read_text())


def test_ready_names_the_freeze_stage_while_it_runs(run: Run) -> None:
    assert any(message.endswith(f": {STAGE}") for message in run.ready_messages), run.ready_messages


def test_the_log_shows_the_stage_its_progress_and_its_duration(run: Run) -> None:
    lines = run.log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(f"start-up: {STAGE} ..."))
    end = next(i for i, line in enumerate(lines) if re.search(rf"start-up: {STAGE} done in \d+\.\d s$", line))
    counts = [
        (i, int(m.group(1)), int(m.group(2))) for i, line in enumerate(lines) if (m := PROGRESS.search(line))
    ]
    builtins = len(load_builtin_voices())
    assert counts and all(total == builtins for _, _, total in counts), run.log
    assert counts[-1][1] == builtins, run.log  # the last count is the whole set
    assert all(start < i < end for i, _, _ in counts), run.log
    # after the engine started (the freeze speaks with it)
    engine_done = next(
        i for i, line in enumerate(lines) if "start-up: start the voxcpm2 engine done in" in line
    )
    assert engine_done < start, run.log


def test_every_builtin_voice_is_frozen_before_ready_and_speech_freezes_nothing_more(run: Run) -> None:
    assert run.freezes_when_ready == len(load_builtin_voices())
    assert run.freezes_after_speech == run.freezes_when_ready
