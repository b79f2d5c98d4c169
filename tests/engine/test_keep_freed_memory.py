"""The engine process keeps the memory it frees (`process_main.keep_freed_memory`): a buffer as large as a
step's, freed and made again, stays in the process instead of going back to the kernel, so making it
again costs next to no page faults. Each case runs in a fresh interpreter, so this one's malloc is left as
it was; both are measured in the same run and compared, since how many faults glibc's default costs
depends on the kernel (its page size, transparent huge pages), not on polyvox."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

BUFFER = 64 * 2**20  # bytes, about a step's buffers on the CPU

# Make the buffer and free it (measuring what stays resident), then make and fill it four more times
# (counting the minor page faults that costs).
SCRIPT = """
import json, resource, sys
import numpy as np
from polyvox.engine.process_main import keep_freed_memory
def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()
if sys.argv[1] == "keep":
    assert keep_freed_memory()
start = resident()
np.ones(BUFFER // 4, dtype=np.float32)
kept = resident() - start
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    np.ones(BUFFER // 4, dtype=np.float32)
print(json.dumps({"kept": kept, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
""".replace("BUFFER", str(BUFFER))


def _run(mode: str) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["NUMPY_MADVISE_HUGEPAGE"] = "0"  # as a torch tensor's (the kernel may still use huge pages)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_step_sized_buffer_stays_and_is_made_again_with_a_tenth_of_the_page_faults_or_fewer():
    default, keep = _run("default"), _run("keep")
    assert default["kept"] < BUFFER / 2, default  # glibc hands a freed large buffer back to the kernel
    assert keep["kept"] >= BUFFER / 2, keep  # with keep_freed_memory it stays in the process
    assert default["faults"] > 0, default  # so making it again faults its pages in anew by default...
    assert keep["faults"] * 10 <= default["faults"], (keep, default)  # ...and hardly at all when kept
