"""Checkpoints on ModelScope (`--model modelscope:ORG/NAME`), through the `modelscope` package (the optional
extra `polyvox[modelscope]`): found in its cache without the network (`MODELSCOPE_CACHE`, default
~/.cache/modelscope, in any layout the package reads: `models/ORG--NAME/snapshots/REV/` as it writes
now, `models/ORG/NAME/` and `hub/models/ORG/NAME/` as earlier versions did), else downloaded by it. A
repo neither cached nor reachable fails at once, naming the cache it looked in."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from polyvox.models.checkpoint import HUB_PROBE_TIMEOUT_S, CheckpointError
from polyvox.runtime.startup import stage

_DEFAULT_ENDPOINT = "https://modelscope.cn"


def cache_root() -> Path:
    """Where the `modelscope` package keeps repos: `MODELSCOPE_CACHE`, else ~/.cache/modelscope. Passed to
    each call: the package reads the variable once per process."""
    return Path(os.environ.get("MODELSCOPE_CACHE") or "~/.cache/modelscope").expanduser()


def _where() -> str:
    return f"the ModelScope cache {cache_root()} (MODELSCOPE_CACHE)"


def _require_package(repo: str) -> None:
    try:
        import modelscope  # noqa: F401
    except ImportError as exc:
        raise CheckpointError(
            f"checkpoint modelscope:{repo} needs the modelscope package: pip install 'polyvox[modelscope]'"
        ) from exc


def cached(repo: str) -> Path | None:
    """The repo's directory in the ModelScope cache, found without the network; None when not there."""
    _require_package(repo)
    from modelscope.hub.snapshot_download import snapshot_download
    from modelscope_hub.errors import HubError

    try:
        return Path(snapshot_download(repo_id=repo, cache_dir=cache_root(), local_files_only=True))
    except (HubError, OSError, ValueError):
        return None


def _endpoint() -> str:
    return os.environ.get("MODELSCOPE_ENDPOINT") or _DEFAULT_ENDPOINT


def _require_reachable(repo: str) -> None:
    """CheckpointError at once, naming the cache, when ModelScope cannot be reached (offline, DNS, a
    firewall); any answer at all leaves the download to say more."""
    import httpx

    try:
        httpx.head(_endpoint(), timeout=HUB_PROBE_TIMEOUT_S)
    except httpx.TransportError as exc:
        raise CheckpointError(
            f"checkpoint modelscope:{repo} is not in {_where()} and ModelScope ({_endpoint()}) cannot be "
            f"reached ({type(exc).__name__}); download it where it can (`modelscope download --model {repo}` "
            "into that cache) or pass --model a local directory"
        ) from exc


@contextlib.contextmanager
def _hub_errors(repo: str) -> Iterator[None]:
    """ModelScope failures as a CheckpointError naming the repo and the cache."""
    from modelscope_hub.errors import HubError
    from requests import RequestException

    try:
        yield
    except (HubError, RequestException, OSError, ValueError) as exc:
        raise CheckpointError(f"could not fetch checkpoint modelscope:{repo} into {_where()}: {exc}") from exc


def fetch_config(repo: str) -> Path:
    """config.json of a repo not cached yet (a small file): enough to check the settings before the whole
    checkpoint downloads."""
    _require_package(repo)
    _require_reachable(repo)
    from modelscope.hub.file_download import model_file_download

    with _hub_errors(repo):
        return Path(model_file_download(repo, "config.json", cache_dir=str(cache_root())))


def download(repo: str) -> Path:
    """The whole checkpoint, into the ModelScope cache."""
    _require_reachable(repo)
    from modelscope.hub.snapshot_download import snapshot_download

    with stage(f"download {repo} from ModelScope"), _hub_errors(repo):
        return Path(snapshot_download(repo_id=repo, cache_dir=cache_root()))
