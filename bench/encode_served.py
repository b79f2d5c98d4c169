"""What one API process spends per audio chunk it serves: encoding, HTTP and the event loop together.

A real polyvox server (uvicorn, the real speech route, OutputPipeline and EncodePool) runs in a child
process in front of the fake tone engine at VoxCPM2's rate and chunk size (48 kHz, 160 ms), which
makes audio as fast as it is asked: the server is the only thing measured. `--streams` clients stream
long answers back to back for `--seconds`; the server's CPU time over the window, divided by the
chunks it served (its `polyvox_audio_seconds_total` / 0.16 s), is what one chunk costs the API
process. Together with the share of that time spent holding the interpreter lock (sample the child
with `py-spy record --gil --pid`), it bounds the chunks per second one API process can serve.

    python bench/encode_served.py --format mp3 --streams 32 --seconds 10 --json served.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import socket
import sys
import time
from datetime import UTC, datetime

import httpx

CHUNK_S = 0.16
ENGINE_RATE = 48_000
CHARS = 2000  # 40 s of audio per answer: 250 chunks
_AUDIO_SECONDS = re.compile(r"^polyvox_audio_seconds_total(?:\{[^}]*\})? ([0-9.e+]+)$", re.MULTILINE)


def serve(port: int, encode_threads: int | None) -> None:
    """The child: a polyvox app around the fake engine, on 127.0.0.1:`port`."""
    import uvicorn

    from polyvox.backends.fake import FakeBackend
    from polyvox.server.app import create_app
    from polyvox.settings import Settings

    settings = Settings(
        encode_threads=encode_threads, cache_enabled=False, max_concurrent_requests=1024, max_queue=1024
    )
    backend = FakeBackend(sample_rate=ENGINE_RATE, seconds_per_char=0.02, chunk_s=CHUNK_S)
    uvicorn.run(create_app(settings, backend), host="127.0.0.1", port=port, log_level="warning")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def audio_seconds(client: httpx.AsyncClient) -> float:
    metrics = (await client.get("/metrics")).text
    return sum(float(value) for value in _AUDIO_SECONDS.findall(metrics))


async def listener(client: httpx.AsyncClient, fmt: str, stop: asyncio.Event) -> None:
    body = {"model": "tts-1", "voice": "alloy", "input": "a" * CHARS, "response_format": fmt}
    while not stop.is_set():
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            async for _ in response.aiter_raw():
                if stop.is_set():
                    break


async def drive(url: str, pid: int, fmt: str, streams: int, seconds: float, warmup_s: float) -> dict:
    limits = httpx.Limits(max_connections=streams + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        stop = asyncio.Event()
        tasks = [asyncio.create_task(listener(client, fmt, stop)) for _ in range(streams)]
        await asyncio.sleep(warmup_s)
        audio_before, cpu_before, started = await audio_seconds(client), cpu_seconds(pid), time.perf_counter()
        await asyncio.sleep(seconds)
        audio_after, cpu_after, wall = (
            await audio_seconds(client),
            cpu_seconds(pid),
            time.perf_counter() - started,
        )
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    chunks = (audio_after - audio_before) / CHUNK_S
    cpu = cpu_after - cpu_before
    return {
        "format": fmt,
        "streams": streams,
        "seconds": round(wall, 2),
        "chunks_per_s": round(chunks / wall, 1),
        "server_cores_busy": round(cpu / wall, 2),
        "server_cpu_ms_per_chunk": round(1000 * cpu / max(chunks, 1), 3),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, child: multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.is_alive():
        try:
            if httpx.get(f"{url}/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not become ready")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default="mp3,pcm", help="response formats, comma-separated")
    parser.add_argument("--streams", type=int, default=32, help="clients streaming at once")
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring window per format")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--encode-threads", type=int, help="the server's encode_threads (unset: its default)")
    parser.add_argument("--port", type=int, default=0, help="the server's port (0: a free one)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"
    runs = []
    for fmt in args.formats.split(","):
        child = multiprocessing.get_context("spawn").Process(
            target=serve, args=(port, args.encode_threads), daemon=True
        )
        child.start()
        try:
            wait_ready(url, child)
            print(f"server pid {child.pid} ({fmt})", flush=True)
            run = asyncio.run(drive(url, child.pid, fmt, args.streams, args.seconds, args.warmup))
        finally:
            child.terminate()
            child.join(10)
        runs.append(run)
        print(json.dumps(run), flush=True)
    if args.json:
        report = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "runs": runs,
        }
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
