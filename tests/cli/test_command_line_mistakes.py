"""Mistakes a person makes on the command line and in a config file, through the real `polyvox`
command: a misspelt setting in the file, a flag of the wrong type, a voice mode without its mode, a
Hugging Face repo id with no Hub to reach. Each is refused with a short message naming what was
written and what to write; `polyvox say --help` lists only what `say` uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.serve_process import free_port

POLYVOX = [sys.executable, "-m", "polyvox.cli"]


def polyvox(
    *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("POLYVOX_CONFIG", *unset)} | (env or {})
    return subprocess.run(
        [*POLYVOX, *args], capture_output=True, text=True, timeout=120, env=environment, check=False
    )


def message(result: subprocess.CompletedProcess, command: str) -> str:
    """The start-up failure's message: exit 1, no traceback, and what follows `polyvox COMMAND: `."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    prefix = f"polyvox {command}: "
    assert prefix in result.stderr, result.stderr
    return result.stderr[result.stderr.index(prefix) :]


# --- the config file ---------------------------------------------------------------------------------


def test_a_misspelt_setting_in_a_toml_config_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.toml"
    config.write_text('host = "127.0.0.1"\nmax_qeue = 5\n')
    refused = message(polyvox("serve", "--config", str(config), "--port", "0"), "serve")
    assert refused.strip() == (
        f"polyvox serve: config file {config}, line 2: 'max_qeue' is not a setting; did you mean 'max_queue'?"
    )


def test_every_unknown_name_of_a_json_config_is_named(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.json"
    config.write_text('{\n  "POLYVOX_PORT": 8001,\n  "log_level": "info",\n  "frobnicate": true\n}\n')
    refused = message(polyvox("say", "Hi.", env={"POLYVOX_CONFIG": str(config)}), "say")
    assert "line 2: 'POLYVOX_PORT' is not a setting; did you mean 'port'?" in refused
    assert "line 4: 'frobnicate' is not a setting" in refused
    assert "log_level" not in refused


def test_a_config_file_of_known_settings_still_starts(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.toml"
    config.write_text('max_queue = 5\nlog_level = "warning"\n')
    result = polyvox("say", "Hi.", "--config", str(config), "-o", str(tmp_path / "hi.wav"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "hi.wav").stat().st_size > 1000


# --- flags -------------------------------------------------------------------------------------------


def test_say_help_lists_only_what_say_uses() -> None:
    result = polyvox("say", "--help")
    assert result.returncode == 0, result.stderr
    for serve_only in (
        "--port",
        "--host",
        "--api-keys",
        "--max-queue",
        "--state-url",
        "--voices-dir",
        "--ui",
    ):
        assert serve_only not in result.stdout, serve_only
    for used in ("--voice", "--format", "--model", "--device", "--lora", "--lexicon-path", "--config"):
        assert used in result.stdout, used


def test_a_serve_flag_given_to_say_is_refused() -> None:
    result = polyvox("say", "Hi.", "--max-queue", "3")
    assert result.returncode == 2
    assert "unrecognized arguments: --max-queue 3" in result.stderr


def test_a_flag_of_the_wrong_type_is_one_line() -> None:
    result = polyvox("serve", "--port", "abc")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "polyvox serve: error: argument --port: invalid int value: 'abc' (see `polyvox serve --help`)"
    ]


def test_a_voice_mode_without_its_mode_names_what_was_written() -> None:
    refused = message(polyvox("serve", "--instructions-mode-by-voice", "narrator", "--port", "0"), "serve")
    assert "instructions_mode_by_voice = 'narrator' (from --instructions-mode-by-voice)" in refused
    assert "'narrator' is not VOICE=MODE" in refused


def test_a_wrong_voice_mode_names_the_voice_and_the_mode() -> None:
    refused = message(
        polyvox("serve", "--instructions-mode-by-voice", "narrator=loud", "--port", "0"), "serve"
    )
    assert "instructions_mode_by_voice['narrator'] = 'loud'" in refused
    assert "'design' or 'ignore'" in refused


# --- a Hugging Face repo id without the Hub ------------------------------------------------------------


@pytest.mark.timeout(60)  # huggingface_hub's own retries took ~25 s; this fails at once
def test_an_unreachable_hub_fails_at_once_saying_how_to_run_offline(tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HOME": str(tmp_path / "hf")}
    result = polyvox("serve", "--model", "nobody/absent", "--port", "0", env=env, unset=("HF_HUB_OFFLINE",))
    refused = message(result, "serve")
    assert "Retrying" not in result.stderr  # huggingface_hub's backoff never started
    assert f"Hugging Face Hub ({env['HF_ENDPOINT']}) cannot be reached" in refused
    assert "HF_HUB_OFFLINE=1" in refused and "hf download nobody/absent" in refused
