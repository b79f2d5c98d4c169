"""The engine processes of a `polyvox serve`, from /proc: its ranks (forked by multiprocessing's forkserver,
a child of the server) and, behind a launcher, its API processes (spawned)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def engine_pids(server_pid: int) -> list[int]:
    """The processes multiprocessing started for the server: spawned ones, and those its forkserver forked
    (not the forkserver itself)."""
    pids: list[int] = []
    for child in children(server_pid):
        command = _cmdline(child)
        if "spawn_main" in command:
            pids.append(child)
        elif "multiprocessing.forkserver" in command:
            pids += children(child)
    return sorted(pids)


def forkserver_of(server_pid: int) -> int:
    """The server's forkserver: the child its engine ranks were forked from."""
    (forkserver,) = [pid for pid in children(server_pid) if "multiprocessing.forkserver" in _cmdline(pid)]
    return forkserver


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children of any of its threads, and theirs)."""
    found = children(pid)
    for child in list(found):
        found |= descendants(child)
    return found


def children(pid: int) -> set[int]:
    """The children of any of `pid`'s threads."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(child) for child in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


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


@contextmanager
def frozen(pids: list[int]) -> Iterator[None]:
    """Processes stopped (SIGSTOP) for the block, and let go (SIGCONT) after it, whatever happened in
    it: a stopped process would outlive the test, its parent's kill too. The engine ranks of the tiny
    model make a long request in about 1.5 s; stopped, they keep it in flight as long as a test looks."""
    for pid in pids:
        freeze(pid)
    try:
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def maps_torch(pid: int) -> list[str]:
    """The libraries of PyTorch process `pid` has mapped (libtorch, libc10...): none unless it imported it."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return sorted({line.split()[-1] for line in maps.splitlines() if "/torch/" in line})
