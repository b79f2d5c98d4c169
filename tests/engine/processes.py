"""The engine processes of a `polyvox serve` (its children that multiprocessing spawned), from /proc."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def engine_pids(server_pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{server_pid}/task").glob("*"):
        try:
            children += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(pid for pid in set(children) if "spawn_main" in _cmdline(pid))


def engine_pid_of_rank(server_pid: int, rank: int) -> int:
    """The engine process serving data-parallel rank `rank`: the one holding the socket bound to its
    address (…/engine-RANK.sock), matched by inode between /proc/net/unix and the process's fds."""
    inodes = {
        f"socket:[{fields[6]}]"
        for fields in (line.split() for line in Path("/proc/net/unix").read_text().splitlines()[1:])
        if len(fields) > 7 and fields[7].endswith(f"/engine-{rank}.sock")
    }
    for pid in engine_pids(server_pid):
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                if os.readlink(fd) in inodes:
                    return pid
            except OSError:
                continue
    raise LookupError(f"no engine process of {server_pid} holds rank {rank}'s socket")


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
    os.kill(pid, signal.SIGKILL)


def freeze(pid: int) -> None:
    """Stop the process where it stands (SIGSTOP): it holds its requests and answers nothing."""
    os.kill(pid, signal.SIGSTOP)
