"""What an engine rank's death costs: `polyvox serve --random-weights tiny --device cpu
--data-parallel-size N` on loopback, rounds of C streamed requests (wav, each with its own seed, two
pieces of text each) sent at once; in each round, once all are routed, kill -9 of the rank that was sent
the most of them. Per round: seconds from the kill until `/ready` says the rank is down (200 degraded,
or 503 with one rank) and until it says ready again (the restarted process serves); how the C requests
ended (whole; cut or failed), how many had no audio at the kill and how many of those ended whole;
the requests sent again (`polyvox_engine_rerouted_requests_total`); and the seconds until the last of
the C ended, against a round with no kill before it. With `--hang` the rank is not killed but frozen
(SIGSTOP: alive, making no step), so the server's `engine_hang_timeout_s` (give it in `--serve-args`)
must find it hung and kill it: "kill to down" then includes that timeout. Prints (and writes) JSON.

    python bench/rank_restart.py --data-parallel-size 2 --streams 24 --rounds 3
    python bench/rank_restart.py --data-parallel-size 1 --streams 8 --rounds 3 --json restart_dp1.json
    python bench/rank_restart.py --hang --serve-args "--engine-hang-timeout-s 5" --rounds 2
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from served_bench import die_with_parent, free_port, stop_server, wait_ready  # noqa: E402

from engine.processes import engine_pid_of_rank, freeze, kill9  # noqa: E402
from engine.serving import Stream, rerouted, routed_per_rank  # noqa: E402
from helpers.metrics import scrape  # noqa: E402


def cpu_model() -> str:
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def ready_status(url: str) -> str:
    try:
        answer = httpx.get(f"{url}/ready", timeout=5)
    except httpx.TransportError:
        return "unreachable"
    return answer.json().get("status", "ready") if answer.status_code == 200 else str(answer.status_code)


def one_round(
    url: str, server: int, ranks: int, count: int, seed: int, kill: bool, hang: bool = False
) -> dict:
    """C streams at once; with `kill`, kill -9 (`hang`: SIGSTOP) of the busier rank once all are routed."""
    before = scrape(url)
    streams = [Stream(f"Request {n} is long enough for two pieces.", seed + n) for n in range(count)]
    threads = [threading.Thread(target=s.run, args=(url,)) for s in streams]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while sum(routed_per_rank(scrape(url), ranks)) < sum(routed_per_rank(before, ranks)) + count:
        time.sleep(0.02)
    result: dict = {"kill": kill, "hang": hang}
    if kill:
        now, then = routed_per_rank(scrape(url), ranks), routed_per_rank(before, ranks)
        routed = [now[r] - then[r] for r in range(ranks)]
        rank = routed.index(max(routed))
        victim = engine_pid_of_rank(server, rank)
        silent = {id(s) for s in streams if not s.audio}
        (freeze if hang else kill9)(victim)
        killed = time.monotonic()
        down = up = None
        while up is None:
            status = ready_status(url)
            now = time.monotonic() - killed
            if down is None and status != "ready":
                down = now
            elif down is not None and status == "ready":
                up = now
            time.sleep(0.02)
        result.update(
            rank=rank,
            routed_to_it=routed[rank],
            seconds_to_down=round(down or 0.0, 3),
            seconds_to_ready=round(up, 3),
            no_audio_at_kill=len(silent),
        )
    for thread in threads:
        thread.join()
    if kill:
        result["no_audio_at_kill_whole"] = sum(id(s) in silent and s.ended == "done" for s in streams)
    after = scrape(url)
    result.update(
        seconds_to_last=round(time.monotonic() - started, 3),
        whole=sum(s.ended == "done" for s in streams),
        failed=sum(s.ended != "done" for s in streams),
        endings={e: sum(s.ended == e for s in streams) for e in ("done", "cut", "error", "refused")},
        rerouted=sum(
            rerouted(after, r, why) - rerouted(before, r, why)
            for r in range(ranks)
            for why in ("rank_died", "send_failed")
        ),
    )
    return result


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "1024",
        "--data-parallel-size", str(args.data_parallel_size), "--max-piece-chars", "40",
        "--voices-dir", str(workdir / "voices"), "--log-level", "warning", *shlex.split(args.serve_args),
    ]  # fmt: skip
    with (
        open(workdir / "serve.log", "w") as log,
        subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent) as proc,
    ):
        try:
            ready_s = wait_ready(proc, url, 180)
            Stream("Warm up.", 1).run(url)  # the builtin voice frozen before anything is timed
            rounds = []
            for n in range(args.rounds):
                seed = 1000 * (n + 1)
                rounds.append(one_round(url, proc.pid, args.data_parallel_size, args.streams, seed, False))
                rounds.append(
                    one_round(url, proc.pid, args.data_parallel_size, args.streams, seed, True, args.hang)
                )
                while ready_status(url) != "ready":
                    time.sleep(0.1)
        finally:
            stop_server(proc)
    return {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": cpu_model(),
        "data_parallel_size": args.data_parallel_size,
        "streams": args.streams,
        "ready_s": round(ready_s, 1),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-parallel-size", type=int, default=2)
    parser.add_argument("--streams", type=int, default=24, help="requests sent at once in each round")
    parser.add_argument("--rounds", type=int, default=3, help="each a round without a kill, then one with")
    parser.add_argument("--serve-args", default="", help="more polyvox serve flags")
    parser.add_argument("--hang", action="store_true", help="freeze the rank (SIGSTOP) instead of killing it")
    parser.add_argument("--json", type=Path, help="write the result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="polyvox-restart-") as workdir:
        result = measure(args, Path(workdir))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
