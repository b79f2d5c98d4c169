"""What building an app and its first answers cost in CPU, tree against tree.

For each round and each `--tree` (a checkout: its `src` goes first on PYTHONPATH), a fresh Python process
builds `--apps` apps one after the other (`create_app` around the fake back end, the settings' defaults
with the audio cache off), each served on loopback by the tests' real uvicorn server
(tests/helpers/server.py), and measures its own CPU (user + sys) for: `create_app`, the server's start,
the app's first request (`GET /health`) and the next one. What is paid once per process (imports, the
first app) is left out: the medians are over apps 2 to N. Trees alternate within each round, so a
machine's drift falls on all of them alike; medians and ranges are printed per tree, every round goes to
`--json`.

    python bench/app_start.py --tree /tmp/before --tree . --rounds 6 --json app-start.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serve_start import summary  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("create_app_ms", "serve_ms", "first_request_ms", "next_request_ms")

CHILD = """
import json, os, statistics, sys, time
import httpx
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

rows = []
with httpx.Client() as client:
    for _ in range(int(sys.argv[1])):
        t0 = time.process_time()
        app = create_app(Settings(cache_enabled=False), FakeBackend())
        t1 = time.process_time()
        with running_server(app, wait_ready=False) as url:
            t2 = time.process_time()
            first = client.get(url + "/health")
            t3 = time.process_time()
            client.get(url + "/health")
            t4 = time.process_time()
        assert first.status_code == 200, first.text
        rows.append([t1 - t0, t2 - t1, t3 - t2, t4 - t3])
later = rows[1:]
print(json.dumps([round(1000 * statistics.median(column), 2) for column in zip(*later)]))
"""


def one_round(tree: str, apps: int) -> dict:
    """The medians of one fresh process of `tree` building `apps` apps."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(tree) / "src"), str(ROOT / "tests")])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(apps)], env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    medians = json.loads(done.stdout.splitlines()[-1])
    return {"tree": tree, "apps": apps, **dict(zip(PHASES, medians, strict=True))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a checkout whose src/ to run")
    parser.add_argument("--apps", type=int, default=30, help="apps built in each round's process")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write every round here")
    args = parser.parse_args()
    rounds = []
    for n in range(args.rounds):
        for tree in args.tree:
            rounds.append({"round": n, **one_round(tree, args.apps)})
            print(json.dumps(rounds[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds}, indent=1))
    for tree in args.tree:
        print(summary(rounds, tree, PHASES, "rounds"))


if __name__ == "__main__":
    main()
