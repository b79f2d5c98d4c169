"""The container entrypoint (deploy/docker/entrypoint.sh), run as the image runs it: with the real
`polyvox` command, with a recording stand-in for it, and its health check against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.tools import DEPLOY, ROOT

ENTRYPOINT = DEPLOY / "docker" / "entrypoint.sh"


def run(*args: str, env: dict[str, str] | None = None, path_first: Path | None = None):
    bin_dir = Path(sys.executable).parent
    search = [str(path_first)] if path_first else []
    environ = {
        **os.environ,
        **(env or {}),
        "PATH": os.pathsep.join([*search, str(bin_dir), "/usr/bin", "/bin"]),
    }
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env=environ, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    """A directory whose `polyvox` writes the arguments it was given as JSON, then exits 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "polyvox"
    fake.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \"$@\"\n"
    )
    fake.chmod(0o755)
    return bin_dir


def recorded(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_no_arguments_serves(recorder):
    assert recorded(run(path_first=recorder)) == ["serve"]


def test_flags_go_to_serve(recorder):
    assert recorded(run("--port", "9000", "--log-level", "debug", path_first=recorder)) == [
        "serve",
        "--port",
        "9000",
        "--log-level",
        "debug",
    ]


@pytest.mark.parametrize("command", ["say", "bench", "checkpoint"])
def test_polyvox_subcommands_pass_through(recorder, command):
    assert recorded(run(command, "--x", "y", path_first=recorder)) == [command, "--x", "y"]


def test_other_commands_run_as_given(recorder):
    result = run("echo", "hello", path_first=recorder)
    assert result.returncode == 0 and result.stdout == "hello\n"


def test_an_unwritable_volume_is_named_before_serving(recorder, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run(env={"POLYVOX_CACHE_DIR": str(blocker / "cache")}, path_first=recorder)
    assert recorded(result) == ["serve"]  # it still serves (polyvox then runs without a cache)
    assert f"{blocker / 'cache'} is not writable" in result.stderr


def test_the_real_cli_answers_through_the_entrypoint():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: polyvox serve")


def test_healthcheck_passes_against_a_live_server(serve):
    url = serve()
    port = url.rsplit(":", 1)[1]
    assert run("healthcheck", env={"POLYVOX_PORT": port}).returncode == 0


def test_healthcheck_fails_when_nothing_answers():
    from helpers.serve_process import free_port

    result = run("healthcheck", env={"POLYVOX_PORT": str(free_port())})
    assert result.returncode == 1
    assert "/health on port" in result.stderr


def test_the_image_copies_the_entrypoint_it_names():
    for dockerfile in ("Dockerfile", "Dockerfile.cpu"):
        text = (ROOT / dockerfile).read_text()
        assert "COPY deploy/docker/entrypoint.sh /usr/local/bin/polyvox-entrypoint" in text
        assert 'ENTRYPOINT ["polyvox-entrypoint"]' in text
