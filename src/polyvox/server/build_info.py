"""`polyvox_build_info{version,commit,torch,cuda}`: which polyvox, built from which commit, on which
PyTorch and CUDA, as a gauge that is always 1 (join on it to split any series by release)."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from polyvox import __version__

# Set by the images at build time (`docker build --build-arg POLYVOX_COMMIT=...`): an installed
# package has no git history to ask. It is build metadata, not a setting.
COMMIT_ENV = "POLYVOX_COMMIT"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str
    torch: str  # "none" when PyTorch is not installed
    cuda: str  # the CUDA version PyTorch was built for; "none" for a CPU build

    @classmethod
    def of_this_process(cls) -> BuildInfo:
        torch, cuda = _torch_versions()
        return cls(__version__, _commit(), torch, cuda)


def _commit() -> str:
    """POLYVOX_COMMIT, else the commit of the git checkout polyvox runs from, else "unknown"."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    return _checkout_commit()


@functools.cache  # once per process: each app built would otherwise run git again
def _checkout_commit() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else UNKNOWN


@functools.cache  # the installed PyTorch does not change under a running process
def _torch_versions() -> tuple[str, str]:
    """PyTorch's version and its CUDA build, read without importing torch (seconds, in a process that
    may never need it: the embedded voice)."""
    try:
        torch = importlib.metadata.version("torch")
        spec = importlib.util.find_spec("torch")
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return "none", "none"
    if spec is None or not spec.submodule_search_locations:
        return torch, UNKNOWN
    # torch/version.py is a few plain assignments, written when the wheel was built.
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    loaded = importlib.util.spec_from_file_location("polyvox_torch_version", version_file)
    if loaded is None or loaded.loader is None:
        return torch, UNKNOWN
    module = importlib.util.module_from_spec(loaded)
    try:
        loaded.loader.exec_module(module)
    except Exception:  # a torch whose version file is not plain data: say so, do not fail the scrape
        return torch, UNKNOWN
    return torch, getattr(module, "cuda", None) or "none"


class BuildInfoCollector(Collector):
    """The build info, worked out once (a git call at most) and exported on every scrape."""

    def __init__(self, info: BuildInfo | None = None):
        self.info = info or BuildInfo.of_this_process()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "polyvox_build_info",
            "Always 1: this server's polyvox version, commit, PyTorch version and PyTorch's CUDA build.",
            labels=["version", "commit", "torch", "cuda"],
        )
        family.add_metric([self.info.version, self.info.commit, self.info.torch, self.info.cuda], 1.0)
        yield family
