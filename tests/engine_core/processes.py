"""The engine processes of a `polyvox serve` (its children that multiprocessing spawned), from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def engine_pids(server_pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{server_pid}/task").glob("*"):
        try:
            children += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(pid for pid in set(children) if "spawn_main" in _cmdline(pid))


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def kill9(pid: int) -> None:
    os.kill(pid, 9)
