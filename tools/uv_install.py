"""`pip install ARGS` into the environment of the Python that runs this script, done by uv where it can be:
the test environment's extras resolve and install in seconds with uv where pip takes half a minute of one
core (BENCHMARKS.md). uv reads no pip configuration, and a machine's pip configuration may say where
packages come from (a wheel directory, a mirror, a constraint file: where a CPU build of PyTorch lies):
`pip config list` is read and handed to uv as the environment variables that mean the same. Where uv
cannot be installed or fails, pip installs instead, saying so.

    .venv/bin/python tools/uv_install.py -q -e ".[test]"

Used by the Makefile's test targets (`make test`, `make install-test`); `make serve` and `make install` use
pip itself."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

UV_REQUIREMENT = "uv==0.13.9"

# pip's setting -> (uv's variable, the separator uv wants between several values); pip separates them
# with whitespace. A setting left out changes nothing uv does (the version check, the progress bar).
PIP_TO_UV = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "trusted-host": ("UV_INSECURE_HOST", " "),
    "cert": ("SSL_CERT_FILE", None),
    "timeout": ("UV_HTTP_TIMEOUT", None),
    "default-timeout": ("UV_HTTP_TIMEOUT", None),
}
# pip's settings that only say yes ("true", "1", "yes", "on") -> uv's flags that mean the same
PIP_FLAGS_TO_UV = {"no-index": ["--no-index"], "pre": ["--prerelease", "allow"]}
# pip's sections that apply to `pip install`, the later overriding the earlier (the environment last)
SECTIONS = ("global", "install", ":env:")


def pip_settings(python: str) -> dict[str, str]:
    """pip's effective settings for `pip install`, as `pip config list` prints them (its files, then the
    PIP_* environment variables)."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, dict[str, str]] = {section: {} for section in SECTIONS}
    for line in listed.splitlines():
        name, _, value = line.partition("=")
        section, _, key = name.rpartition(".")
        if section in found and value:
            found[section][key] = str(ast.literal_eval(value))  # printed as Python's repr()
    return {key: value for section in SECTIONS for key, value in found[section].items()}


def uv_options(settings: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The uv variables and flags that mean what pip's `settings` mean. pip takes each package's best
    version from all its indexes and wheel directories together, which uv calls `unsafe-best-match`."""
    env = {"UV_INDEX_STRATEGY": "unsafe-best-match"}
    flags: list[str] = []
    for key, value in settings.items():
        if key in PIP_TO_UV:
            variable, separator = PIP_TO_UV[key]
            env[variable] = separator.join(value.split()) if separator else value
        elif key in PIP_FLAGS_TO_UV and value.lower() in ("1", "true", "yes", "on"):
            flags += PIP_FLAGS_TO_UV[key]
    return env, flags


def uv_program(python: str) -> str | None:
    """uv beside `python` (its environment's scripts), installed there by pip if missing; None where it
    cannot be."""
    uv = Path(python).parent / "uv"
    if not uv.exists():
        installed = subprocess.run([python, "-m", "pip", "install", "-q", UV_REQUIREMENT])
        if installed.returncode != 0:
            return None
    return str(uv) if uv.exists() else None


def install_with_uv(python: str, args: list[str]) -> str | None:
    """`pip install args` done by uv: None once it is, else why it was not."""
    uv = uv_program(python)
    if uv is None:
        return f"{UV_REQUIREMENT} could not be installed"
    try:
        variables, flags = uv_options(pip_settings(python))
    except subprocess.CalledProcessError:
        return "pip's configuration could not be read (`pip config list` failed)"
    uv_args = [arg for arg in args if arg != "--no-compile"]  # uv compiles nothing unless asked to
    command = [uv, "pip", "install", "--python", python, *flags, *uv_args]
    if subprocess.run(command, env={**os.environ, **variables}).returncode != 0:
        return "uv failed (above)"
    return None


def main(args: list[str]) -> int:
    why_not = install_with_uv(sys.executable, args)
    if why_not is None:
        return 0
    print(f"uv_install: {why_not}; installing with pip", file=sys.stderr)
    return subprocess.run([sys.executable, "-m", "pip", "install", *args]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
