"""The per-request cost of a named key's limits: `Limiter.charge` (requests and characters per minute)
and `open_stream` + `close_stream` (streams at once), in this process and in Redis (a redis-server on
loopback, one Lua script per check), on the asyncio loop as the server calls them.

    python bench/limiter_bench.py [--calls N] [--redis-server PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import time

from polyvox.server.tenancy.keys import KeyLimits
from polyvox.server.tenancy.limits import Limiter

LIMITS = KeyLimits(requests_per_minute=10**9, characters_per_minute=10**12, max_streams=10**6)


async def per_call_us(limiter: Limiter, calls: int) -> dict[str, float]:
    for _ in range(200):  # warm the connection and the script cache
        await limiter.charge("bench", LIMITS, 100)
    began = time.perf_counter()
    for _ in range(calls):
        await limiter.charge("bench", LIMITS, 100)
    charge = (time.perf_counter() - began) / calls * 1e6
    began = time.perf_counter()
    for _ in range(calls):
        lease = await limiter.open_stream("bench", LIMITS)
        assert lease is not None
        await limiter.close_stream(lease)
    stream = (time.perf_counter() - began) / calls * 1e6
    return {"charge_us": round(charge, 1), "open_and_close_stream_us": round(stream, 1)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def in_redis(binary: str, calls: int) -> dict[str, float]:
    from polyvox.state.connection import StateConnection

    port, folder = free_port(), tempfile.mkdtemp()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    try:
        connection = StateConnection(f"redis://127.0.0.1:{port}/0")
        while not connection.check():
            time.sleep(0.05)
        connection.open_async()
        try:
            return await per_call_us(Limiter(connection), calls)
        finally:
            await connection.aclose()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--redis-server", default=shutil.which("redis-server"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {"in_process": asyncio.run(per_call_us(Limiter(), args.calls))}
    if args.redis_server:
        results["redis"] = asyncio.run(in_redis(args.redis_server, max(1, args.calls // 10)))
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
