"""Which polyvox is running, as an operator asks it: `polyvox --version`, and the build info series
`polyvox_build_info{version,commit,torch,cuda}` on /metrics of a real `polyvox serve`. The version is
pyproject.toml's, read here on its own."""

from __future__ import annotations

import importlib.metadata
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def torch_labels() -> dict[str, str]:
    try:
        import torch
    except ImportError:
        return {"torch": "none", "cuda": "none"}
    return {"torch": importlib.metadata.version("torch"), "cuda": torch.version.cuda or "none"}


def test_version_flag_prints_the_packaged_version():
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"polyvox {VERSION}"


def test_build_info_names_the_version_the_image_commit_torch_and_cuda():
    with polyvox_serve("--no-cache-enabled", env={"POLYVOX_COMMIT": "feedc0de1234"}) as (proc, url):
        samples = scrape(url)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    labels = {"version": VERSION, "commit": "feedc0de1234", **torch_labels()}
    assert value(samples, "polyvox_build_info", **labels) == 1.0
    assert sum(1 for name, _ in samples if name == "polyvox_build_info") == 1


def test_build_info_falls_back_to_the_git_checkout(serve, monkeypatch):
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    head = subprocess.run([git, "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.delenv("POLYVOX_COMMIT", raising=False)
    url = serve()
    labels = {"version": VERSION, "commit": head.stdout.strip(), **torch_labels()}
    assert value(scrape(url), "polyvox_build_info", **labels) == 1.0
