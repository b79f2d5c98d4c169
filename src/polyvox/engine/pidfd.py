"""`PidFd`: one process held by a pidfd (Linux 5.3+), which names that process alone, never one that took
its pid after it: whether it has exited (even while no one has reaped it), waiting for that, and SIGKILL
to it. `PidFd.open` gives None where there are no pidfds."""

from __future__ import annotations

import contextlib
import os
import select
import signal


class PidFd:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls, pid: int) -> PidFd | None:
        """ProcessLookupError when no process has `pid`."""
        try:
            return cls(os.pidfd_open(pid))
        except ProcessLookupError:
            raise
        except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
            return None

    def exited(self) -> bool:
        return self.wait(0.0)

    def wait(self, timeout_s: float) -> bool:
        """Whether the process has exited, waiting up to `timeout_s` for it."""
        poller = select.poll()  # not select(): a server with many connections has descriptors past 1024
        poller.register(self.fd, select.POLLIN)  # readable once it exits
        return bool(poller.poll(timeout_s * 1000))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.fd, signal.SIGKILL)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
