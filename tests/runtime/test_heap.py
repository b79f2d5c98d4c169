"""The collector while a process starts (polyvox/runtime/heap.py): off while it builds, what it built then
frozen, and on again; the engine's forkserver leaves PyTorch's objects frozen before it forks any rank."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from polyvox.runtime.heap import startup_heap


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_off_while_a_process_starts_and_what_it_built_is_frozen(collector_on):
    frozen = gc.get_freeze_count()
    with startup_heap():
        assert not gc.isenabled()
        built = [[index] for index in range(5_000)]  # containers the collector tracks
        assert gc.get_freeze_count() == frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(built)
    assert gc.is_tracked(built[0])


def test_a_start_that_fails_still_turns_the_collector_back_on(collector_on):
    with pytest.raises(RuntimeError), startup_heap():
        raise RuntimeError("the model is missing")
    assert gc.isenabled()


def test_a_block_inside_another_leaves_the_collector_off_for_the_outer_one(collector_on):
    with startup_heap():
        with startup_heap():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_forkserver_forks_ranks_from_a_frozen_heap_with_the_collector_on():
    # what multiprocessing's forkserver does before its first fork: import the preloaded module
    probe = (
        "import gc, sys; import polyvox.engine.forkserver; "
        "print(gc.isenabled(), gc.get_freeze_count(), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    enabled, frozen, torch_imported = out.split()
    assert (enabled, torch_imported) == ("True", "True")
    assert int(frozen) > 100_000, out  # PyTorch's and the engine's objects (about 290,000 here)
