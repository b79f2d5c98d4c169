"""`OwnerWatch`: whether the process that started an engine process (the API server, or the launcher) is
gone. Its parent is not the owner: engine processes are forked from multiprocessing's forkserver, which
lives on while any process it forked does. The owner is watched through a pidfd (`PidFd`: a pid reused
after the owner's exit is never mistaken for it), else by asking whether its pid still exists; where the
owner is the parent after all (spawned), by the parent changing."""

from __future__ import annotations

import os

from polyvox.engine.pidfd import PidFd


class OwnerWatch:
    def __init__(self, owner_pid: int) -> None:
        self.owner_pid = owner_pid
        self._parent = os.getppid() if os.getppid() == owner_pid else None
        self._pidfd: PidFd | None = None
        self._gone = False
        if self._parent is None:
            try:
                self._pidfd = PidFd.open(owner_pid)
            except ProcessLookupError:  # it died while this process started
                self._gone = True
            else:
                self._gone = self._pidfd is None and not _exists(owner_pid)

    def gone(self) -> bool:
        if not self._gone:
            if self._parent is not None:
                self._gone = os.getppid() != self._parent
            elif self._pidfd is not None:
                self._gone = self._pidfd.exited()
            else:
                self._gone = not _exists(self.owner_pid)
        return self._gone

    def close(self) -> None:
        if self._pidfd is not None:
            self._pidfd.close()
            self._pidfd = None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has the pid now: the owner, this user's, is gone
        return False
    return True
