"""`OwnerWatch`: an engine process forked from the forkserver is not its owner's child, so it watches the
owner itself, and finds it gone once the owner exits (killed with -9 too), even while the owner's parent
has not reaped it yet; an owner that died before the watch began is gone at once; without pidfds the
pid is asked after instead."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.waiting import wait_until
from polyvox.engine.owner import OwnerWatch


@pytest.fixture
def owner():
    """A process that is not this one's parent, as the forkserver's engine processes see their owner."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def test_an_owner_that_exits_is_gone_before_it_is_reaped(owner):
    watch = OwnerWatch(owner.pid)
    assert not watch.gone()
    owner.kill()  # a zombie now: this process has not waited for it
    wait_until(watch.gone, "the watch sees its owner gone")
    assert owner.poll() == -9
    watch.close()


def test_an_owner_already_dead_is_gone_at_once(owner):
    owner.kill()
    owner.wait()  # reaped: its pid names no process
    assert OwnerWatch(owner.pid).gone()


def test_the_owner_that_is_the_parent_is_watched_through_the_parent():
    """Spawned (no forkserver): the owner is the parent, alive while this test runs."""
    watch = OwnerWatch(os.getppid())
    assert not watch.gone()
    watch.close()


def test_without_pidfds_the_pid_is_asked_after(owner, monkeypatch):
    def no_pidfds(pid: int) -> int:
        raise OSError("pidfd_open: not supported by this kernel")

    monkeypatch.setattr(os, "pidfd_open", no_pidfds)
    watch = OwnerWatch(owner.pid)
    assert not watch.gone()
    owner.kill()
    owner.wait()
    assert watch.gone()
