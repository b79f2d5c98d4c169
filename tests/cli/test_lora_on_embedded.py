"""`--lora` given to the embedded voice, which serves no adapters: `polyvox say` and `polyvox serve` exit
non-zero with one line naming the adapter and what to do (`say` wrote a file and exited 0 without a
word before), and write nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.serve_process import free_port

pytest.importorskip("polyvox.backends.embedded")


def polyvox(*args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "polyvox.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
        check=False,
    )


def one_line(result: subprocess.CompletedProcess, command: str) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"polyvox {command}: "), result.stderr
    return lines[-1]


def test_say_with_an_adapter_on_the_embedded_voice_is_an_error(tmp_path: Path) -> None:
    output = tmp_path / "out.wav"
    line = one_line(polyvox("say", "Hello.", "--lora", "foo=/nope", "-o", str(output)), "say")
    assert "--lora foo" in line and "embedded voice serves no LoRA adapters" in line and "--model" in line
    assert not output.exists()


def test_serve_with_an_adapter_on_the_embedded_voice_does_not_start(tmp_path: Path) -> None:
    result = polyvox(
        "serve", "--lora", "foo=/nope", "--port", str(free_port()), "--voices-dir", str(tmp_path)
    )
    assert "--lora foo" in one_line(result, "serve")
