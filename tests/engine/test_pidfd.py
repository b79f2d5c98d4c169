"""`PidFd`: a process held by its pidfd is seen running, then killed through it and seen to exit before
anyone reaps it; a pid that names no process is refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from polyvox.engine.pidfd import PidFd


def test_a_process_is_killed_through_its_pidfd_and_seen_to_exit_before_it_is_reaped():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pidfd = PidFd.open(process.pid)
        assert pidfd is not None  # Linux 5.3+: CI's and every supported server's
        assert not pidfd.exited()
        pidfd.kill()
        assert pidfd.wait(30.0)
        assert process.poll() == -9
        pidfd.kill()  # gone already: nothing happens
        pidfd.close()
    finally:
        process.kill()
        process.wait()


def test_a_pid_that_names_no_process_is_refused():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: its pid names no process
    with pytest.raises(ProcessLookupError):
        PidFd.open(process.pid)
