"""How `polyvox serve --api-server-count N` spreads keep-alive connections over its API processes: the
embedded voice on loopback, then rounds of bursts (B connections opened at once, as a proxy's pool
fills), each counted by the process that accepted it (the kernel's socket table: nothing in the server
is asked), then a keep-alive GET /health on each (every one answered 200) and all closed. With
`--nginx`, also rounds of W speech requests at once through the shipped nginx configuration (one
`server` line: the launcher's port), counting nginx's upstream connections per process at the
moment the most were open and right after (the pool it keeps for the next). Prints (and writes) JSON:
each round's connections per process.

    python bench/api_spread.py --bursts 16,64 --rounds 20
    python bench/api_spread.py --api-server-count 4 --bursts 64 --nginx 16,64 --json spread.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from served_bench import die_with_parent, free_port, stop_server, wait_ready  # noqa: E402

from helpers.connection_owners import connection_counts  # noqa: E402
from helpers.nginx import NGINX_DIR, retarget, running_nginx  # noqa: E402

HEALTH = b"GET /health HTTP/1.1\r\nHost: polyvox\r\nConnection: keep-alive\r\n\r\n"


def api_pids(launcher: int) -> list[int]:
    """The launcher's spawned children (with the embedded voice, its API processes alone)."""
    tasks = Path(f"/proc/{launcher}/task").glob("*")
    children = {int(pid) for task in tasks for pid in (task / "children").read_text().split()}
    return sorted(pid for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes())


def one_burst(port: int, pids: list[int], size: int) -> list[int]:
    """Open `size` connections one after the other as fast as they go; once every one is accepted, how
    many each process holds."""
    connections = [socket.create_connection(("127.0.0.1", port)) for _ in range(size)]
    deadline = time.monotonic() + 30
    while sum((counts := connection_counts(pids, port)).values()) < size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {sum(counts.values())} of {size} connections were accepted")
        time.sleep(0.01)
    for connection in connections:
        connection.sendall(HEALTH)
    for connection in connections:
        status = connection.makefile("rb").readline()
        if b" 200 " not in status:
            raise RuntimeError(f"GET /health on a pooled connection: {status!r}")
    for connection in connections:
        connection.close()
    while sum(connection_counts(pids, port).values()):  # the next burst starts on an idle server
        time.sleep(0.01)
    return [counts[pid] for pid in pids]


def one_wave(nginx_url: str, port: int, pids: list[int], size: int) -> tuple[list[int], list[int]]:
    """`size` speech requests at once through nginx: nginx's connections to each process when the most
    were open, and right after (the pool it keeps for the next requests; only nginx connects here)."""
    body = {"input": "A short sentence, spoken while others are.", "voice": "alloy", "response_format": "pcm"}
    url = f"{nginx_url}/v1/audio/speech"
    with ThreadPoolExecutor(size) as pool:
        answers = [pool.submit(httpx.post, url, json=body, timeout=120) for _ in range(size)]
        peak: dict[int, int] = {}
        while not all(answer.done() for answer in answers):
            counts = connection_counts(pids, port)
            if sum(counts.values()) > sum(peak.values()):
                peak = counts
            time.sleep(0.005)
    after = connection_counts(pids, port)
    if failed := [a.result().status_code for a in answers if a.result().status_code != 200]:
        raise RuntimeError(f"speech through nginx answered {failed}")
    return [peak.get(pid, 0) for pid in pids], [after[pid] for pid in pids]


def spread(rounds: list[list[int]], size: int) -> dict:
    return {
        "per_round": rounds,
        "largest_share": [max(r) / max(sum(r), 1) for r in rounds],
        "all_on_one": sum(max(r) == sum(r) for r in rounds),
        "size": size,
    }


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    serve = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--api-server-count", str(args.api_server_count), "--voices-dir", str(workdir / "voices"),
        "--log-level", "warning", *shlex.split(args.serve_args),
    ]  # fmt: skip
    with (
        open(workdir / "serve.log", "w") as log,
        subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent) as proc,
    ):
        try:
            wait_ready(proc, f"http://127.0.0.1:{port}", 180)
            pids = api_pids(proc.pid)
            if len(pids) != args.api_server_count:
                raise RuntimeError(f"{len(pids)} API processes, not {args.api_server_count}")
            bursts = {size: [one_burst(port, pids, size) for _ in range(args.rounds)] for size in args.bursts}
            waves: dict[int, list[tuple[list[int], list[int]]]] = {}
            if args.nginx:
                conf = retarget((NGINX_DIR / "polyvox.conf").read_text(), [f"127.0.0.1:{port}"], free_port())
                listen = int(conf.split("listen 127.0.0.1:", 1)[1].split(";", 1)[0])
                with running_nginx(shutil.which("nginx") or "nginx", conf, listen) as nginx_url:
                    waves = {
                        size: [one_wave(nginx_url, port, pids, size) for _ in range(args.rounds)]
                        for size in args.nginx
                    }
        finally:
            stop_server(proc)
    return {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": platform.processor() or platform.machine(),
        "api_server_count": args.api_server_count,
        "rounds": args.rounds,
        "bursts": {str(size): spread(rounds, size) for size, rounds in bursts.items()},
        "nginx_waves": {
            str(size): {
                "peak": spread([peak for peak, _ in rounds], size),
                "pool_after": spread([after for _, after in rounds], size),
            }
            for size, rounds in waves.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--api-server-count", type=int, default=2)
    parser.add_argument("--bursts", type=lambda s: [int(n) for n in s.split(",")], default=[16, 64])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--nginx",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[],
        help="speech waves through nginx",
    )
    parser.add_argument("--serve-args", default="", help="more polyvox serve flags")
    parser.add_argument("--json", type=Path, help="write the result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="polyvox-spread-") as workdir:
        result = measure(args, Path(workdir))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
