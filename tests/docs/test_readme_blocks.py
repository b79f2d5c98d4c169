"""Every client block in README runs as written against the server the Quick start starts (`make
serve`: `polyvox serve` on the embedded voice), its URL put in place of http://127.0.0.1:8000: each
python block, and each shell block that calls curl. A block whose paragraph above says it needs VoxCPM2 is
left out (the embedded voice refuses a clone); the other shell blocks start servers or run the suite."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import soundfile

from helpers.serve_process import polyvox_serve

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICK_START_URL = "http://127.0.0.1:8000"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    needs_voxcpm2: bool


def blocks() -> list[Block]:
    found = []
    for match in FENCE.finditer(README):
        above = README[: match.start()].rstrip().split("\n\n")[-1]  # the paragraph just above
        found.append(Block(match[1], match[2], "needs voxcpm2" in above.lower()))
    return found


def client_blocks() -> list[Block]:
    return [
        block
        for block in blocks()
        if not block.needs_voxcpm2
        and (block.language == "python" or (block.language == "sh" and block.code.startswith("curl")))
    ]


def test_the_blocks_are_client_calls_server_commands_or_marked_as_needing_voxcpm2() -> None:
    runnable = client_blocks()
    assert [block.language for block in runnable].count("python") >= 1
    assert any(block.language == "sh" for block in runnable)
    marked = [block for block in blocks() if block.needs_voxcpm2]
    assert any("ref_audio" in block.code for block in marked)  # the clone is a block of its own
    assert not any("ref_audio" in block.code or "speaker.wav" in block.code for block in runnable)
    for block in blocks():
        if block not in runnable and not block.needs_voxcpm2:
            first_words = {line.split()[0] for line in block.code.splitlines() if line.strip()}
            assert first_words <= {"make", "polyvox", ".venv/bin/polyvox"}, block.code


@pytest.fixture(scope="module")
def url():
    with polyvox_serve() as (_, base):
        yield base


def test_every_client_block_runs_against_the_quick_starts_server(url: str, tmp_path: Path) -> None:
    for block in client_blocks():
        code = block.code.replace(QUICK_START_URL, url)
        command = (
            [sys.executable, "-c", code]
            if block.language == "python"
            else ["bash", "-euo", "pipefail", "-c", code]
        )
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{block.code}\n{done.stdout}\n{done.stderr}"
    written = sorted(path.name for path in tmp_path.iterdir())
    assert {"hello.mp3", "hello.wav", "styled.mp3"} <= set(written)
    for name in written:
        samples, rate = soundfile.read(tmp_path / name)
        assert samples.size / rate > 0.5, name  # speech, decoded
