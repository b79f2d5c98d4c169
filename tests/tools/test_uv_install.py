"""tools/uv_install.py, which installs the test environment with uv: what pip's configuration says (wheel
directories, a constraint file, no index) holds for uv too, and where uv cannot be had, pip installs.
Everything is offline: two versions of a small package built here, in two wheel directories that only a
pip configuration file names, installed into a fresh virtual environment."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "uv_install.py"
PROBE = "polyvox-uv-probe"


def build_wheel(directory: Path, version: str) -> None:
    """A pure-Python wheel of `PROBE` at `version`, whose module says its version."""
    directory.mkdir(parents=True, exist_ok=True)
    info = f"polyvox_uv_probe-{version}.dist-info"
    files = {
        "polyvox_uv_probe.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(directory / f"polyvox_uv_probe-{version}-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


@pytest.fixture
def machine(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment, and the environment variables of a machine whose pip configuration
    file alone says where packages come from: version 1.0 in one wheel directory, 2.0 in another, a
    constraint file that caps the package at 1.0, and no index (the index it names is a closed port).
    (The environment borrows the base Python's pip where it has one, which takes no install; otherwise it
    gets its own, as `make test`'s does.)"""
    build_wheel(tmp_path / "wheels-a", "1.0")
    build_wheel(tmp_path / "wheels-b", "2.0")
    (tmp_path / "constraints.txt").write_text(f"{PROBE}<=1.0\n")
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\n"
        "index-url = http://127.0.0.1:9/simple\n"
        f"find-links = {tmp_path / 'wheels-a'}\n    {tmp_path / 'wheels-b'}\n"
        f"constraint = {tmp_path / 'constraints.txt'}\n"
        "[install]\nno-index = true\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=str(config), UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    base = subprocess.run([sys._base_executable, "-c", "import pip"], capture_output=True)
    base_has_pip = base.returncode == 0
    venv.create(tmp_path / "env", system_site_packages=base_has_pip, with_pip=not base_has_pip)
    return tmp_path / "env", env


def install(env_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`pip install PROBE`, as the Makefile's test targets ask tools/uv_install.py for it."""
    return subprocess.run(
        [env_dir / "bin" / "python", TOOL, "-q", PROBE], env=env, capture_output=True, text=True
    )


def installed(env_dir: Path, env: dict[str, str]) -> tuple[str, str]:
    """The probe's module's version in that environment, and which installer put it there."""
    shown = subprocess.run(
        [env_dir / "bin" / "python", "-c",
         "import importlib.metadata as m, polyvox_uv_probe as p; "
         f"print(p.VERSION, m.distribution({PROBE!r}).read_text('INSTALLER').strip())"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    version, installer = shown.stdout.split()
    return version, installer


def test_uv_installs_from_where_pip_is_configured_to_look(machine) -> None:
    env_dir, env = machine
    uv = Path(sys.executable).parent / "uv"
    assert uv.exists(), "the test environment has no uv: `make install-test` installs it"
    (env_dir / "bin" / "uv").symlink_to(uv)
    run = install(env_dir, env)
    assert run.returncode == 0, run.stderr
    assert "installing with pip" not in run.stderr, run.stderr
    # both wheel directories were searched (2.0 is there), the constraint held, no index was asked
    assert installed(env_dir, env) == ("1.0", "uv")


def test_pip_installs_where_uv_cannot_be_installed(machine) -> None:
    """No uv in the environment, and none to be had where pip looks (no index, no uv wheel): pip
    installs, with the same configuration, and says why."""
    env_dir, env = machine
    run = install(env_dir, env)
    assert run.returncode == 0, run.stderr
    assert "could not be installed; installing with pip" in run.stderr
    assert installed(env_dir, env) == ("1.0", "pip")
