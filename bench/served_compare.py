"""The served comparison issue #13 asks for, in one run: `polyvox serve --random-weights SIZE --device
cpu --no-cache-enabled` started three ways (the engine in a thread of the server, `--no-engine-process`;
the engine in a process of its own, one rank; two ranks, `--data-parallel-size 2`), each driven by
`polyvox bench --stream` at every concurrency asked for with the same requests (same text, voice, format
and sampling seed, so the same audio and output length), one server start per way. A fourth way, the
engine alone (issue #23), runs `bench/engine_alone.py`: the same requests shaped by the server's own
code and handed to the back end in that process, no HTTP, no encoding, no client; each served row then
says its share of the engine alone's throughput at its concurrency. Every row also says how the engine
spent the row (`engine`, from its step counters: steps, patches per step, mean step, and the share of
the row's wall time it was stepping), so a share below 1 reads as slower steps, smaller batches or an
engine left idle; a served row also counts the minor page faults per step and the resident size, of the
server's process and of the processes under it (the engine processes), from /proc. Writes every row
(polyvox bench's report, the load average before and after it) as JSON and prints the table
BENCHMARKS.md keeps.

    python bench/served_compare.py --json bench/results/2026-11-30-cpu-served/served_compare.json
    python bench/served_compare.py --concurrency 1 --requests-per-stream 1 --input "A short line."
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from served_bench import die_with_parent, free_port, stop_server, wait_ready  # bench/ is on the path

WARM_UP = "One sentence to warm the server up."
HERE = Path(__file__).resolve().parent

# the engine in-process, fed the served rows' requests: the figure the served rows are a share of
ENGINE_ALONE = "engine alone"
# name -> extra `polyvox serve` flags
WAYS = {
    "in-thread": ["--no-engine-process"],
    "process DP=1": ["--engine-process", "--data-parallel-size", "1"],
    "process DP=2": ["--engine-process", "--data-parallel-size", "2"],
}


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def warm_up(url: str, voice: str, ranks: int) -> None:
    """One request (it generates and freezes the builtin voice), then one per rank at once, before
    measuring: with DP=2 the second rank would otherwise pay its first step inside the c=1 row."""
    body = {"input": WARM_UP, "voice": voice, "response_format": "pcm"}
    with httpx.Client(timeout=600) as client:
        client.post(f"{url}/v1/audio/speech", json=body).raise_for_status()
    if ranks > 1:
        bench = [
            sys.executable, "-m", "polyvox.cli", "bench", "--url", url, "--stream", "--json",
            "--concurrency", str(ranks), "--requests", str(ranks), "--voice", voice, "--input", WARM_UP,
        ]  # fmt: skip
        subprocess.run(bench, check=True, capture_output=True, text=True)


def model_flags(args: argparse.Namespace, workdir: Path, flags: list[str]) -> list[str]:
    """The settings flags every way's engine is built with (the voices directory shared: the voice is
    frozen once, by the first way)."""
    return [
        "--random-weights", args.size, "--device", "cpu", "--no-cache-enabled",
        "--voices-dir", str(workdir / "voices"), "--log-level", "warning",
        *flags, *shlex.split(args.serve_args),
    ]  # fmt: skip


def requests_at(concurrency: int, args: argparse.Namespace) -> int:
    return max(args.min_requests, args.requests_per_stream * concurrency)


def measure_engine_alone(args: argparse.Namespace, workdir: Path) -> list[dict]:
    """`bench/engine_alone.py` at every concurrency, in one process; one row per concurrency."""
    command = [
        sys.executable, str(HERE / "engine_alone.py"),
        "--concurrency", ",".join(map(str, args.concurrency)),
        "--requests", ",".join(str(requests_at(c, args)) for c in args.concurrency),
        "--voice", args.voice, "--seed", str(args.seed), *(["--input", args.input] if args.input else []),
        *model_flags(args, workdir, []),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-4000:], file=sys.stderr)
        raise RuntimeError(f"bench/engine_alone.py exited with {done.returncode}")
    rows = []
    for report in json.loads(done.stdout):
        use = engine_use(report.pop("engine_before"), report.pop("engine_after"), report["wall_s"])
        rows.append({"way": ENGINE_ALONE, "seed": args.seed, **report, "engine": use, "command": command})
    for row in rows:
        print(format_row(row), file=sys.stderr, flush=True)
    return rows


def engine_counters(url: str) -> dict[str, float]:
    """The engine's steps, patches and seconds spent stepping since it started, summed over its ranks,
    from the server's `/metrics` (each rank's mean step times its steps)."""
    names = {
        "polyvox_engine_steps_total": "steps",
        "polyvox_engine_patches_total": "patches",
        "polyvox_engine_step_seconds_mean": "mean_step_s",
        "polyvox_engine_prefix_cache_queries_total": "prompt_blocks",
    }
    ranks: dict[str, dict[str, float]] = {}
    text = httpx.get(f"{url}/metrics", timeout=60).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                ranks.setdefault(sample.labels["rank"], {})[names[sample.name]] = sample.value
    return {
        "steps": sum(rank["steps"] for rank in ranks.values()),
        "patches": sum(rank["patches"] for rank in ranks.values()),
        "step_s": sum(rank["mean_step_s"] * rank["steps"] for rank in ranks.values()),
        "prompt_blocks": sum(rank["prompt_blocks"] for rank in ranks.values()),
    }


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds `pid` has used so far, all its threads, not its children (from /proc;
    None where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def minor_faults(root: int) -> dict[int, int]:
    """Minor page faults so far of `root` and every process under it (the engine processes), by pid,
    from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    faults: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)  # fields[1]: ppid
        faults[pid] = int(fields[7])  # minflt
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in faults:
            found[pid] = faults[pid]
        todo += children.get(pid, [])
    return found


def resident_mb(pids: list[int]) -> dict[str, float]:
    """The processes' resident size now and at its peak (VmRSS, VmHWM), summed, in MiB."""
    sizes = {"VmRSS": 0.0, "VmHWM": 0.0}
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(":")
            if name in sizes:
                sizes[name] += int(value.split()[0]) / 1024
    return {"now": round(sizes["VmRSS"]), "peak": round(sizes["VmHWM"])}


def faults_per_step(root: int, before: dict[int, int], after: dict[int, int], steps: float) -> dict:
    """Minor page faults per engine step in the server's own process and in the processes under it
    (the engine processes: the step loop's buffers faulted in again from the kernel)."""

    def per_step(pids: set[int]) -> float:
        total = sum(after[pid] - before.get(pid, 0) for pid in pids)
        return round(total / steps, 1) if steps else 0.0

    return {"server": per_step({root} & after.keys()), "under_server": per_step(after.keys() - {root})}


def engine_use(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, float]:
    """How the engine spent a row: its steps, patches per step, mean step, the share of the row's wall
    time spent stepping (summed over ranks: up to the number of ranks), and the prompt blocks its
    requests looked up in the prefix cache (their prompts' length: the text's and the voice clip's)."""
    steps = after["steps"] - before["steps"]
    step_s = after["step_s"] - before["step_s"]
    patches = after["patches"] - before["patches"]
    return {
        "steps": steps,
        "patches": patches,
        "patches_per_step": round(patches / steps, 2) if steps else 0.0,
        "mean_step_ms": round(1000 * step_s / steps, 2) if steps else 0.0,
        "busy": round(step_s / wall_s, 3) if wall_s else 0.0,
        "prompt_blocks": after["prompt_blocks"] - before["prompt_blocks"],
    }


def add_shares(rows: list[dict]) -> None:
    """Each served row's throughput as a share of the engine alone's at its concurrency (None without
    an engine-alone row there)."""
    alone = {
        row["concurrency"]: row["throughput_audio_s_per_s"] for row in rows if row["way"] == ENGINE_ALONE
    }
    for row in rows:
        if row["way"] != ENGINE_ALONE:
            engine = alone.get(row["concurrency"])
            row["engine_share"] = row["throughput_audio_s_per_s"] / engine if engine else None


def measure_way(name: str, flags: list[str], args: argparse.Namespace, workdir: Path) -> list[dict]:
    """Start one server, measure every concurrency against it, stop it; one row per concurrency."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        *model_flags(args, workdir, flags),
    ]  # fmt: skip
    ranks = int(flags[flags.index("--data-parallel-size") + 1]) if "--data-parallel-size" in flags else 1
    log_path = workdir / f"serve-{len(list(workdir.glob('serve-*.log')))}.log"
    rows = []
    with (
        open(log_path, "w") as log,
        subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent) as proc,
    ):
        try:
            ready_s = wait_ready(proc, url, args.ready_timeout)
            warm_up(url, args.voice, ranks)
            for concurrency in args.concurrency:
                requests = requests_at(concurrency, args)
                bench = [
                    sys.executable, "-m", "polyvox.cli", "bench", "--url", url, "--stream", "--json",
                    "--concurrency", str(concurrency), "--requests", str(requests), "--voice", args.voice,
                    "--seed", str(args.seed), *(["--input", args.input] if args.input else []),
                ]  # fmt: skip
                load_before, engine_before = load_average(), engine_counters(url)
                faults_before, cpu_before = minor_faults(proc.pid), cpu_seconds(proc.pid)
                done = subprocess.run(bench, check=True, capture_output=True, text=True)
                faults_after, cpu_after = minor_faults(proc.pid), cpu_seconds(proc.pid)
                report = json.loads(done.stdout)
                use = engine_use(engine_before, engine_counters(url), report["wall_s"])
                # the server process's CPU per request: with an engine process, the API process's alone
                # (parsing, the plan, the text front end, encoding, HTTP); in-thread, the engine's too
                use["server_cpu_ms_per_request"] = (
                    None
                    if cpu_before is None or cpu_after is None
                    else round((cpu_after - cpu_before) * 1000 / requests, 1)
                )
                use["minor_faults_per_step"] = faults_per_step(
                    proc.pid, faults_before, faults_after, use["steps"]
                )
                engines = [pid for pid in faults_after if pid != proc.pid]
                use["resident_mib"] = {
                    "server": resident_mb([proc.pid]),
                    "under_server": resident_mb(engines),
                }
                row = {
                    "way": name,
                    "seed": args.seed,
                    "load_avg_before": load_before,
                    "load_avg_after": load_average(),
                    **report,
                    "engine": use,
                }
                rows.append({**row, "serve_command": serve, "server_ready_s": round(ready_s, 1)})
                print(format_row(row), file=sys.stderr, flush=True)
        except Exception:
            print(log_path.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop_server(proc)
    return rows


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:,.0f}"


def format_row(row: dict) -> str:
    load = f"{row['load_avg_before'][0]:.1f} → {row['load_avg_after'][0]:.1f}"
    share = row.get("engine_share")
    use = row["engine"]
    return (
        f"| {row['way']} | {row['concurrency']} | {row['requests']} | {row['throughput_audio_s_per_s']:.1f} "
        f"| {'n/a' if share is None else f'{share:.0%}'} "
        f"| {use['patches_per_step']:.1f} / {use['mean_step_ms']:.0f} ms / {use['busy']:.0%} "
        f"| {ms(row['ttfa_p50_s'])} / {ms(row['ttfa_p95_s'])} ms | {row['streaming_viability']:.0%} "
        f"| {row['audio_s_mean']:.2f} s | {row['errors']} | {load} |"
    )


def format_table(rows: list[dict]) -> str:
    head = [
        "| engine | concurrency | requests | audio-s / wall-s | share of engine alone "
        "| patches per step / mean step / stepping | first audio p50 / p95 | streaming viability "
        "| audio per request | errors | load avg (1 min) before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + [format_row(row) for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=("tiny", "full"), default="tiny", help="Random weights' size.")
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(c) for c in text.split(",")],
        default=[1, 16, 32],
        help="Streams in flight, comma-separated (default: 1,16,32).",
    )
    parser.add_argument(
        "--ways",
        type=lambda text: text.split(","),
        default=[ENGINE_ALONE, *WAYS],
        help=f"Which ways, comma-separated, in order (default: all of {ENGINE_ALONE}, {', '.join(WAYS)}).",
    )
    parser.add_argument(
        "--requests-per-stream", type=int, default=2, help="Requests per stream in flight (default: 2)."
    )
    parser.add_argument("--min-requests", type=int, default=1, help="At least this many requests a row.")
    parser.add_argument("--input", default=None, help="Text of every request (default: polyvox bench's).")
    parser.add_argument("--voice", default="alloy", help="Voice of every request (default: alloy).")
    parser.add_argument(
        "--seed", type=int, default=7, help="Sampling seed of every request: the same audio in every row."
    )
    parser.add_argument("--serve-args", default="", help="More `polyvox serve` flags for every way.")
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="Seconds to wait for /ready.")
    parser.add_argument("--json", type=Path, default=None, help="Write the result here too.")
    args = parser.parse_args()
    unknown = set(args.ways) - {ENGINE_ALONE, *WAYS}
    if unknown:
        parser.error(f"unknown ways {sorted(unknown)}; choose from {[ENGINE_ALONE, *WAYS]}")

    started = datetime.datetime.now(datetime.UTC)
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyvox-served-compare-") as workdir:
        for name in args.ways:
            if name == ENGINE_ALONE:
                rows += measure_engine_alone(args, Path(workdir))
            else:
                rows += measure_way(name, WAYS[name], args, Path(workdir))
    add_shares(rows)
    result = {
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "size": args.size,
        "command": [sys.executable, *sys.argv],
        "rows": rows,
    }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    print(format_table(rows))


if __name__ == "__main__":
    main()
