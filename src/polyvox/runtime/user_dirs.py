"""Where polyvox keeps a user's files when no setting names a directory: under the XDG base directories
(`XDG_CACHE_HOME`, `XDG_DATA_HOME`), by default in the home directory. A process that has neither (an
arbitrary UID in a container: no HOME, no passwd entry) gets a StartupError naming the setting that
would place the files, not a traceback."""

from __future__ import annotations

import os
from pathlib import Path

from polyvox.runtime.startup import StartupError


def _home(setting: str) -> Path:
    try:
        return Path.home()
    except RuntimeError:  # no HOME, and the passwd database has no entry for this UID
        raise StartupError(
            f"{setting} defaults to a directory in the home directory, and this user (uid {os.getuid()}) "
            f"has none (HOME unset, no passwd entry): set {setting}, or HOME"
        ) from None


def cache_home(setting: str) -> Path:
    """`$XDG_CACHE_HOME`, else `~/.cache`; StartupError naming `setting` when there is no home."""
    return Path(os.environ.get("XDG_CACHE_HOME") or _home(setting) / ".cache")


def data_home(setting: str) -> Path:
    """`$XDG_DATA_HOME`, else `~/.local/share`; StartupError naming `setting` when there is no home."""
    return Path(os.environ.get("XDG_DATA_HOME") or _home(setting) / ".local" / "share")
