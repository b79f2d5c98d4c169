"""`OwnerWatch`: whether the process that started an engine process (the API server, or the launcher) is
gone. Its parent is not the owner: engine processes are forked from multiprocessing's forkserver, which
lives on while any process it forked does. The owner is watched through a pidfd (Linux 5.3+: it
names that one process, so a pid reused after the owner's exit is never mistaken for it), else by
asking whether its pid still exists; where the owner is the parent after all (spawned), by the parent
changing."""

from __future__ import annotations

import contextlib
import os
import select


class OwnerWatch:
    def __init__(self, owner_pid: int) -> None:
        self.owner_pid = owner_pid
        self._parent = os.getppid() if os.getppid() == owner_pid else None
        self._pidfd: int | None = None
        self._gone = False
        if self._parent is None:
            try:
                self._pidfd = os.pidfd_open(owner_pid)
            except ProcessLookupError:  # it died while this process started
                self._gone = True
            except (AttributeError, OSError):  # no pidfd here: the pid is asked after instead
                self._gone = not _exists(owner_pid)

    def gone(self) -> bool:
        if not self._gone:
            if self._parent is not None:
                self._gone = os.getppid() != self._parent
            elif self._pidfd is not None:
                self._gone = bool(select.select([self._pidfd], [], [], 0)[0])  # readable once it exits
            else:
                self._gone = not _exists(self.owner_pid)
        return self._gone

    def close(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has the pid now: the owner, this user's, is gone
        return False
    return True
