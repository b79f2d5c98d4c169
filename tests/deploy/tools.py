"""Where the deployment tests find the repository's deploy files and the tools that check them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def venv_tool(name: str) -> str:
    """A command installed by the test extra beside this Python (hadolint, kubernetes-validate)."""
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    assert found, f"{name} is missing: it comes with the test extra (pip install -e '.[test]')"
    return found


def system_tool(name: str, package: str) -> str:
    """A system command; the test is skipped, saying which package brings it, when it is absent."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        pytest.skip(f"{name} not installed (Debian package {package}; .ci/run installs it)")
    return found
