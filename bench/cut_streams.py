"""What streams cut by their client leave behind in the API process: `polyvox serve` (the embedded
voice, the audio cache off) on loopback, then N streamed requests per format, each closed by the
client after its first chunk, a few at a time; the server process's RSS, threads, open files and
open audio encoders (/metrics) before, right after the cuts and after an idle wait. `--whole` reads
every answer to its end instead: the same load without cuts, to tell what the cuts leave from what
serving itself grows to. Prints (and writes) JSON.

    python bench/cut_streams.py --formats flac,mp3 --cuts 500
    python bench/cut_streams.py --formats flac --cuts 500 --whole
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from served_bench import die_with_parent, free_port, stop_server, wait_ready  # noqa: E402

# A first sentence ready at once, then more still being spoken when the client leaves; `{n}` makes
# every request new (the cache is off anyway).
TEXT = "Number {n}. The listener hangs up while this second sentence is still being spoken. A third."


def process_state(pid: int, url: str) -> dict:
    """RSS (MiB), threads and open file descriptors of process `pid`, read from /proc, and the open
    audio encoders its /metrics reports (None from a server without that gauge)."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    metrics = httpx.get(f"{url}/metrics", timeout=30).text.splitlines()
    encoders = [line.split()[-1] for line in metrics if line.startswith("polyvox_audio_encoders_open ")]
    return {
        "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
        "threads": int(status["Threads"]),
        "open_files": len(os.listdir(f"/proc/{pid}/fd")),
        "encoders_open": int(float(encoders[0])) if encoders else None,
    }


def one_stream(client: httpx.Client, url: str, fmt: str, n: int, whole: bool) -> None:
    """One streamed request, closed by the client once its first chunk of audio arrived (or read to its
    end with `whole`)."""
    body = {"model": "tts-1", "input": TEXT.format(n=n), "voice": "alloy", "response_format": fmt}
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        if whole:
            response.read()
        else:
            next(response.iter_raw())
    # Leaving the block closes an unfinished response: httpx drops the connection.


def run_streams(url: str, fmt: str, count: int, parallel: int, whole: bool) -> float:
    """`count` streams of `fmt`, `parallel` at a time, each on a connection of its own; seconds taken."""
    started = time.monotonic()
    limits = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=120, limits=limits) as client, ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda n: one_stream(client, url, fmt, n, whole), range(count)))
    return time.monotonic() - started


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--no-cache-enabled", "--voices-dir", str(workdir / "voices"), "--log-level", "warning",
        *shlex.split(args.serve_args),
    ]  # fmt: skip
    log_path = workdir / "serve.log"
    rows = []
    with (
        open(log_path, "w") as log,
        subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent) as proc,
    ):
        try:
            wait_ready(proc, url, 300)
            for fmt in args.formats.split(","):
                # One whole answer first, so what a first request builds once is in the baseline.
                body = {"input": "Warm up.", "voice": "alloy", "response_format": fmt, "stream": False}
                httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120).raise_for_status()
                time.sleep(args.settle)
                before = process_state(proc.pid, url)
                seconds = run_streams(url, fmt, args.cuts, args.parallel, args.whole)
                after = process_state(proc.pid, url)
                time.sleep(args.settle)
                settled = process_state(proc.pid, url)
                row = {
                    "format": fmt,
                    "streams": args.cuts,
                    "cut": not args.whole,
                    "seconds": round(seconds, 1),
                }
                rows.append(row | {"before": before, "after_cuts": after, "after_idle": settled})
                print(json.dumps(rows[-1]), file=sys.stderr)
        except Exception:
            print(log_path.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop_server(proc)
    return {"serve_command": serve, "settle_s": args.settle, "parallel": args.parallel, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--formats", default="flac,mp3", help="Comma-separated formats (default: flac,mp3).")
    parser.add_argument("--cuts", type=int, default=500, help="Streams cut per format (default: 500).")
    parser.add_argument("--parallel", type=int, default=8, help="Streams in flight at once (default: 8).")
    parser.add_argument("--whole", action="store_true", help="Read every answer to its end: no cuts.")
    parser.add_argument("--settle", type=float, default=10.0, help="Idle seconds before the last reading.")
    parser.add_argument("--serve-args", default="", help="More `polyvox serve` flags, one string.")
    parser.add_argument("--json", type=Path, default=None, help="Write the result here too.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="polyvox-cuts-") as workdir:
        result = {"machine": platform.machine(), **measure(args, Path(workdir))}
    text = json.dumps(result, indent=1)
    if args.json is not None:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
