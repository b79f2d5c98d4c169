"""`polyvox serve` and `polyvox say` as real processes that cannot start: a missing checkpoint, a
checkpoint with a missing or mis-shaped tensor, a malformed config file, invalid settings, an engine that
fails to start. Each exits non-zero with one message naming the path, the tensor or the line, and what
to do; the Python traceback only with `--debug`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from helpers.serve_process import free_port
from polyvox.models.random_checkpoint import write_random_checkpoint

POLYVOX = [sys.executable, "-m", "polyvox.cli"]


def polyvox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"} | (env or {})
    return subprocess.run(
        [*POLYVOX, *args], capture_output=True, text=True, timeout=180, env=environment, check=False
    )


def refused(result: subprocess.CompletedProcess, command: str) -> str:
    """The message of a start-up failure, checked to be one message and no traceback."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    prefix = f"polyvox {command}: "
    assert prefix in result.stderr, result.stderr
    return result.stderr[result.stderr.index(prefix) :]  # after any log lines of the start so far


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete tiny checkpoint, as `polyvox checkpoint random` writes it."""
    return write_random_checkpoint(tmp_path_factory.mktemp("checkpoint") / "tiny", "tiny", seed=0)


def damaged(checkpoint: Path, tmp_path: Path, edit) -> Path:
    """A copy of `checkpoint` whose LM weights `edit` changed."""
    copy = shutil.copytree(checkpoint, tmp_path / "damaged")
    state = load_file(str(copy / "model.safetensors"))
    edit(state)
    save_file(state, str(copy / "model.safetensors"))
    return copy


def test_serve_names_a_missing_model_directory(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-checkpoint"
    # the checkpoint is checked before the device (which loads PyTorch for seconds): a wrong path is the
    # first thing said, even beside a device this machine lacks
    message = refused(
        polyvox("serve", "--model", str(missing), "--device", "cuda:99", "--port", "0"), "serve"
    )
    assert str(missing) in message and "does not exist" in message
    assert "pass --model" in message  # what to do


def test_debug_keeps_the_traceback(tmp_path: Path) -> None:
    result = polyvox("serve", "--model", str(tmp_path / "nowhere"), "--port", "0", "--debug")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "CheckpointError" in result.stderr
    assert "polyvox serve: checkpoint directory" in result.stderr  # the message still ends it


def test_serve_names_a_missing_tensor(checkpoint: Path, tmp_path: Path) -> None:
    broken = damaged(checkpoint, tmp_path, lambda state: state.pop("stop_head.weight"))
    message = refused(polyvox("serve", "--model", str(broken), "--port", "0"), "serve")
    assert "model.safetensors" in message and "missing keys: stop_head.weight" in message
    assert "download the checkpoint again" in message


def test_say_names_a_mis_shaped_tensor_with_both_shapes(checkpoint: Path, tmp_path: Path) -> None:
    reshape = {"stop_proj.weight": torch.zeros(3, 5)}
    broken = damaged(checkpoint, tmp_path, lambda state: state.update(reshape))
    result = polyvox("say", "Hello.", "--model", str(broken), "-o", str(tmp_path / "out.wav"))
    message = refused(result, "say")
    assert "stop_proj.weight (checkpoint [3, 5], model [64, 64])" in message
    assert not (tmp_path / "out.wav").exists()


def test_a_malformed_toml_config_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.toml"
    config.write_text('host = "127.0.0.1"\nmax_queue = 12 12\n')
    message = refused(polyvox("serve", "--config", str(config)), "serve")
    assert f"config file {config} is not valid TOML: line 2" in message
    assert "max_queue = 12 12" in message and "fix that line" in message


def test_a_malformed_json_config_from_the_environment_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.json"
    config.write_text('{\n  "port": 8000,\n  "max_queue": 12,\n}\n')
    message = refused(polyvox("say", "Hi.", env={"POLYVOX_CONFIG": str(config)}), "say")
    assert f"config file {config} is not valid JSON: line 4" in message


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    message = refused(polyvox("serve", "--config", str(tmp_path / "absent.toml")), "serve")
    assert f"config file {tmp_path / 'absent.toml'} does not exist" in message


def test_invalid_settings_are_named_with_where_they_came_from(tmp_path: Path) -> None:
    config = tmp_path / "polyvox.toml"
    config.write_text('log_level = "info"\nport = 70000\n')
    env = {"POLYVOX_CONFIG": str(config), "VLLM_MAX_NUM_SEQS": "none"}
    message = refused(polyvox("serve", "--max-queue", "-1", env=env), "serve")
    assert f"port = 70000 (from config file {config}, line 2): Input should be less than or equal" in message
    assert "max_num_seqs = 'none' (from environment variable VLLM_MAX_NUM_SEQS)" in message
    assert "max_queue = -1 (from --max-queue)" in message


def test_a_missing_file_a_setting_names_is_named_with_the_setting(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    message = refused(polyvox("serve", "--api-keys-file", str(keys), "--port", "0"), "serve")
    assert f"api_keys_file = {keys}: No such file or directory" in message


def test_a_lexicon_that_is_not_json_is_named(tmp_path: Path) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text("{not json")
    message = refused(polyvox("say", "Hi.", "--lexicon-path", str(lexicon)), "say")
    assert "lexicon_path" in message and str(lexicon) in message and "line 1" in message


def test_an_engine_that_fails_to_start_stops_serve(tmp_path: Path) -> None:
    """The engine starts after the listener opens; failing there exits non-zero, never a 503 forever."""
    blocks = str(10**13)  # a KV cache no machine can allocate: refused at once, never touched
    flags = ("--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", blocks)
    result = polyvox("serve", *flags, "--port", str(free_port()), "--voices-dir", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "engine voxcpm2 failed to start" in result.stderr  # the log line, as it happened
    assert result.stderr.rstrip().splitlines()[-1].startswith("polyvox serve: the engine failed to start:")


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for CUDA where there is none")
def test_asking_for_cuda_without_a_gpu_says_so() -> None:
    message = refused(polyvox("say", "Hi.", "--random-weights", "tiny", "--device", "cuda"), "say")
    assert "device 'cuda'" in message and "--device cpu" in message
