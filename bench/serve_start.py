"""How long `polyvox serve` takes to start, and what it costs, tree against tree.

For each round and each `--tree` (a checkout: its `src` goes first on PYTHONPATH), a fresh `polyvox
serve` with `--flags` (default: the embedded voice) on a free port: the wall time until `/ready`
answers 200, the process's CPU (user + sys, from /proc) and resident memory at that moment, then one
short speech request's time, and after it what the server and every process below it (engine ranks, the
forkserver, API processes) have cost: their number, CPU and proportional memory (PSS, which shares out
the pages processes share, as forked ranks do). Trees alternate within each round, so a machine's drift
falls on all of them alike; medians and ranges are printed per tree, every round goes to `--json`.

    python bench/serve_start.py --tree /tmp/before --tree . --rounds 6 --json start.json
    python bench/serve_start.py --tree . --flags "--random-weights tiny --device cpu" --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from served_bench import die_with_parent, free_port, stop_server, wait_ready  # noqa: E402

from engine.processes import descendants  # noqa: E402

SPEECH = {"model": "tts-1", "voice": "alloy", "response_format": "wav", "input": "Hello there, how are you?"}


def cpu_and_memory(pid: int) -> tuple[float, float]:
    """(CPU seconds, resident MiB) of process `pid` now."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    return cpu, int(status.split("VmRSS:")[1].split()[0]) / 1024


def tree_cost(pid: int) -> dict:
    """The processes at and below `pid`: how many, their CPU seconds and PSS (MiB) now."""
    pids = [pid, *descendants(pid)]
    cpu = pss_kib = 0.0
    for each in pids:
        try:
            cpu += cpu_and_memory(each)[0]
            rollup = Path(f"/proc/{each}/smaps_rollup").read_text()
        except OSError:  # gone meanwhile
            continue
        pss_kib += int(rollup.split("\nPss:")[1].split()[0])
    return {"processes": len(pids), "tree_cpu_s": round(cpu, 3), "tree_pss_mib": round(pss_kib / 1024, 1)}


def one_start(tree: str, flags: list[str], timeout_s: float = 300.0) -> dict:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(tree, "src").resolve()), "PYTHONDONTWRITEBYTECODE": ""}
    with tempfile.TemporaryDirectory(prefix="serve-start-") as voices:
        command = [sys.executable, "-m", "polyvox.cli", "serve", "--port", str(port), "--voices-dir", voices]
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        proc = subprocess.Popen([*command, *flags], env=env, preexec_fn=die_with_parent, **quiet)
        try:
            url = f"http://127.0.0.1:{port}"
            ready = wait_ready(proc, url, timeout_s, poll_s=0.02)
            cpu, rss = cpu_and_memory(proc.pid)
            asked = time.monotonic()
            status = httpx.post(f"{url}/v1/audio/speech", json=SPEECH, timeout=120).status_code
            first = time.monotonic() - asked
            tree_after = tree_cost(proc.pid)
        finally:
            stop_server(proc)
    return {
        "tree": tree,
        "ready_s": round(ready, 3),
        "cpu_at_ready_s": round(cpu, 3),
        "rss_mib": round(rss, 1),
        "first_request_s": round(first, 3),
        "status": status,
        **tree_after,
    }


START_KEYS = ("ready_s", "cpu_at_ready_s", "rss_mib", "first_request_s", "tree_cpu_s", "tree_pss_mib")


def summary(rounds: list[dict], tree: str, keys: tuple[str, ...] = START_KEYS, each: str = "starts") -> str:
    """One line for `tree`: how many of its rounds, and each key's median [range] over them."""
    mine = [r for r in rounds if r["tree"] == tree]
    parts = []
    for key in keys:
        values = [r[key] for r in mine]
        parts.append(f"{key} {statistics.median(values):g} [{min(values):g}-{max(values):g}]")
    return f"{tree}: {len(mine)} {each}, " + ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a checkout whose src/ to run")
    parser.add_argument("--flags", default="--no-cache-enabled", help="polyvox serve's flags, one string")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write every round here")
    args = parser.parse_args()
    flags = shlex.split(args.flags)
    rounds = []
    for n in range(args.rounds):
        for tree in args.tree:
            rounds.append({"round": n, **one_start(tree, flags)})
            print(json.dumps(rounds[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"flags": flags, "rounds": rounds}, indent=1))
    for tree in args.tree:
        print(summary(rounds, tree))


if __name__ == "__main__":
    main()
