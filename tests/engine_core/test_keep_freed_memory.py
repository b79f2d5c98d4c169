"""The engine process keeps the memory it frees (`process_main.keep_freed_memory`): a buffer as large as a
step's, freed and made again, no longer comes back from the kernel one page fault at a time. Each case
runs in a fresh interpreter, so this one's malloc is left as it was."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PAGES = 16384  # a 64 MiB buffer, in 4 KiB pages

# Make and fill the buffer five times; print the minor page faults of the last four rounds.
SCRIPT = """
import resource, sys
import numpy as np
from polyvox.engine_core.process_main import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
np.ones(PAGES * 1024, dtype=np.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    np.ones(PAGES * 1024, dtype=np.float32)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""".replace("PAGES", str(PAGES))


def _faults_per_round(mode: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["NUMPY_MADVISE_HUGEPAGE"] = "0"  # 4 KiB pages, as a torch tensor's
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout) / 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_step_sized_buffer_is_made_again_without_page_faults():
    assert _faults_per_round("default") >= PAGES / 2  # glibc hands it back to the kernel each time
    assert _faults_per_round("keep") < PAGES / 20
