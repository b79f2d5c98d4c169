"""Whether the test suite is bound by the machine's cores or by its own waits, and which files cost it CPU:
runs pytest with the given arguments while sampling `/proc/stat`, logs when each test starts and ends in
each xdist worker and the CPU its worker and the worker's reaped children used meanwhile (this module is
also the pytest plugin that does it), then prints the run's busy and idle core-seconds, which test files
were running while cores were idle (each idle interval shared among them) and which used the most CPU
(a server a file's tests share counts where it is stopped; a process no one waits for counts nowhere).

    python bench/suite_idle.py --json idle.json -- -q -n 2 --dist loadfile --no-loadscope-reorder

Idle core-seconds near zero mean only less CPU makes the suite faster; a large share points at the
files whose waits (sleeps, timeouts, a lone heavy file at the end) leave cores unused.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

LOG_DIR_ENV = "SUITE_IDLE_DIR"


# ------------------------------------------------------------------ the plugin (in each pytest process)


def _log(kind: str, nodeid: str) -> None:
    directory = os.environ.get(LOG_DIR_ENV)
    if not directory:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() + children.ru_utime + children.ru_stime
    with open(Path(directory) / f"tests-{worker}.jsonl", "a") as f:
        f.write(json.dumps({"id": nodeid, kind: time.time(), "cpu": cpu}) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _log("start", nodeid)


def pytest_runtest_logfinish(nodeid, location):
    _log("end", nodeid)


# ------------------------------------------------------------------ the script


def cpu_times() -> tuple[int, int]:
    """(busy, idle) jiffies of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal, idle + iowait


def sample(samples: list[tuple[float, int, int]], stop: threading.Event, every_s: float) -> None:
    while not stop.is_set():
        samples.append((time.time(), *cpu_times()))
        stop.wait(every_s)
    samples.append((time.time(), *cpu_times()))


def intervals(log_dir: Path) -> list[tuple[str, str, float, float, float]]:
    """(worker, test id, start, end, CPU seconds) of every test the workers ran (the controller's copies
    left out)."""
    found = []
    logs = sorted(log_dir.glob("tests-gw*.jsonl")) or [log_dir / "tests-main.jsonl"]  # xdist or not
    for path in logs:
        worker = path.stem.removeprefix("tests-")
        starts: dict[str, tuple[float, float]] = {}
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if "start" in entry:
                starts[entry["id"]] = (entry["start"], entry["cpu"])
            elif entry["id"] in starts:
                start, cpu = starts.pop(entry["id"])
                found.append((worker, entry["id"], start, entry["end"], entry["cpu"] - cpu))
    return found


def report(samples, tests, cores: int, top: int) -> dict:
    first = min(start for _, _, start, _, _ in tests)
    last = max(end for _, _, _, end, _ in tests)
    busy = idle = 0.0
    blame: collections.Counter[str] = collections.Counter()
    for (t0, busy0, idle0), (t1, busy1, idle1) in zip(samples, samples[1:], strict=False):
        if t1 <= first or t0 >= last:
            continue
        jiffies = (busy1 - busy0) + (idle1 - idle0)
        share = (idle1 - idle0) / jiffies if jiffies else 0.0
        seconds = (t1 - t0) * cores
        busy += seconds * (1 - share)
        idle += seconds * share
        running = [test.split("::")[0] for _, test, start, end, _ in tests if start < t1 and end > t0]
        for name in running or ["(no test running)"]:
            blame[name] += seconds * share / max(1, len(running))
    ends: dict[str, float] = collections.defaultdict(float)
    cpu: collections.Counter[str] = collections.Counter()
    for worker, test, _, end, seconds in tests:
        ends[worker] = max(ends[worker], end - first)
        cpu[test.split("::")[0]] += seconds
    return {
        "cores": cores,
        "tests": len(tests),
        "span_s": round(last - first, 1),
        "busy_core_s": round(busy),
        "idle_core_s": round(idle),
        "worker_ends_s": {worker: round(end, 1) for worker, end in sorted(ends.items())},
        "idle_by_file": [[name, round(seconds, 1)] for name, seconds in blame.most_common(top)],
        "tests_cpu_s": round(sum(cpu.values())),
        "cpu_by_file": [[name, round(seconds, 3)] for name, seconds in cpu.most_common(top)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--every-s", type=float, default=0.5, help="how often /proc/stat is read")
    parser.add_argument("--top", type=int, default=30, help="how many files to name")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's arguments")
    args = parser.parse_args()
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    with tempfile.TemporaryDirectory(prefix="suite-idle-") as log_dir:
        env = {**os.environ, LOG_DIR_ENV: log_dir}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
        samples: list[tuple[float, int, int]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample, args=(samples, stop, args.every_s), daemon=True)
        sampler.start()
        try:
            run = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_idle", *pytest_args], env=env)
        finally:
            stop.set()
            sampler.join()
        tests = intervals(Path(log_dir))
        if not tests:
            print("no test ran", file=sys.stderr)
            return run.returncode or 1
        result = {"pytest_exit": run.returncode, **report(samples, tests, os.cpu_count() or 1, args.top)}
    print(json.dumps({k: v for k, v in result.items() if k not in ("idle_by_file", "cpu_by_file")}))
    for name, seconds in result["idle_by_file"]:
        print(f"{seconds:8.1f} idle core-s  {name}")
    for name, seconds in result["cpu_by_file"]:
        print(f"{seconds:8.2f} CPU s  {name}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
