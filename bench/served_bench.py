"""The served path, measured: `polyvox serve --random-weights SIZE` on loopback (its engine in a process
of its own, one data-parallel rank, the audio cache off), one warm-up request (it freezes the voice),
then `polyvox bench --stream` at one concurrency, then SIGTERM. Writes polyvox bench's report with how
long the server took to become ready as JSON. `bench/gpu_bench.py` runs it beside the engine table, so
a GPU run measures HTTP + engine together, not only the engine in-process.

    python bench/served_bench.py --size full --device cuda --concurrency 64 --json served.json
    python bench/served_bench.py --size tiny --device cpu --concurrency 2 --input "A short line."
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

WARM_UP = "One sentence to warm the server up."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent() -> None:
    """Runs in the server's child before exec: it is killed when this script goes, even by SIGKILL (as
    gpu_bench stops a section that outran its time), so no server is left holding the device."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def wait_ready(proc: subprocess.Popen, url: str, timeout_s: float, poll_s: float = 0.5) -> float:
    """Seconds until /ready answered 200 (asked every `poll_s`); RuntimeError if the server exits or never
    gets there."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"polyvox serve exited with {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/ready", timeout=5).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        time.sleep(poll_s)
    raise RuntimeError(f"polyvox serve was not ready after {timeout_s:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM (the server drains), killed if it has not exited a minute later."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def measure(args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    requests = args.requests or 2 * args.concurrency
    url = f"http://127.0.0.1:{port}"
    serve = [
        sys.executable, "-m", "polyvox.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--random-weights", args.size, "--device", args.device, "--no-cache-enabled",
        "--voices-dir", str(workdir / "voices"), "--log-level", "warning", *shlex.split(args.serve_args),
    ]  # fmt: skip
    log_path = workdir / "serve.log"
    with (
        open(log_path, "w") as log,
        subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent) as proc,
    ):
        try:
            ready_s = wait_ready(proc, url, args.ready_timeout)
            body = {"input": WARM_UP, "voice": args.voice, "response_format": "pcm"}
            warm = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=600)
            warm.raise_for_status()
            bench = [
                sys.executable, "-m", "polyvox.cli", "bench", "--url", url, "--stream", "--json",
                "--concurrency", str(args.concurrency), "--requests", str(requests),
                "--voice", args.voice, *(["--input", args.input] if args.input else []),
            ]  # fmt: skip
            report = json.loads(subprocess.run(bench, check=True, capture_output=True, text=True).stdout)
        except Exception:
            print(log_path.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop_server(proc)
    return {"serve_command": serve, "server_ready_s": round(ready_s, 1), **report}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=("tiny", "full"), default="full", help="Random weights' size.")
    parser.add_argument("--device", default="cuda", help="The engine's device (default: cuda).")
    parser.add_argument("--concurrency", type=int, default=64, help="Streams in flight (default: 64).")
    parser.add_argument(
        "--requests", type=int, default=None, help="Requests in all (default: 2 x concurrency)."
    )
    parser.add_argument("--input", default=None, help="Text of every request (default: polyvox bench's).")
    parser.add_argument("--voice", default="alloy", help="Voice of every request (default: alloy).")
    parser.add_argument("--serve-args", default="", help="More `polyvox serve` flags, one string.")
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="Seconds to wait for /ready.")
    parser.add_argument("--json", type=Path, default=None, help="Write the result here too.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="polyvox-served-") as workdir:
        result = {"size": args.size, "device": args.device, **measure(args, Path(workdir))}
    text = json.dumps(result, indent=1)
    if args.json is not None:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
