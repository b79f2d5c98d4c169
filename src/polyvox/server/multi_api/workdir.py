"""The launcher's working directory (its engine ranks' sockets, the API processes' metric files): each of its
processes holds a shared lock on it while it lives, so the last to go can tell that it is last and remove
it, also when the launcher was killed (-9) and left the API processes to drain and exit on their own."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

LOCK_NAME = "alive.lock"


def hold(workdir: Path) -> int:
    """Hold `workdir` for this process (a shared lock, released when the process ends, however it
    ends); the lock's file descriptor."""
    fd = os.open(workdir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def remove_if_last(workdir: Path, fd: int) -> bool:
    """Let go of `workdir` (held through `fd`) and remove it when no other process holds it; whether it
    did. Whoever lets go last finds no other holder, so one of them removes it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(workdir, ignore_errors=True)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
