"""How many real-time streams one API process can encode, per response format.

Each of `--streams` streams feeds the server's own OutputPipeline engine-sized chunks (160 ms at
48 kHz, VoxCPM2's) through the server's own EncodePool, one chunk after another as a response does,
and the audio is served at 24 kHz (resampled, then encoded). All streams run at once, as fast as the
pool takes them; after a warm-up the bench counts the chunks encoded in a `--seconds` window. Per
format and thread count it reports the chunk rate sustained, the streams that rate keeps at real
time (chunks/s x 0.16 s), whether it covers 256 streams (1,600 chunks/s), the CPU the process used
(cores busy: above 1 means the pool's threads ran in parallel, FFmpeg outside the interpreter lock),
the CPU time one chunk costs and the cores 256 streams need at that cost (the figure that still holds
on a busy machine, where the chunk rate only says what this process was given), and how late the
event loop woke from 5 ms sleeps meanwhile (its responsiveness under the load).
`direct_chunks_per_s` is the same work called in a plain loop on one thread, without the pool.
Stream 0's bytes are decoded at the end and their duration checked against the chunks it encoded.

    python bench/encode_bench.py --threads 1,2 --lock-check --json encode.json
    python bench/encode_bench.py --formats mp3,pcm --threads 2 --pitch 5   # the cost of a pitch shift
    python bench/encode_bench.py --dry-run
    py-spy record --gil -f raw -o gil.txt -- python bench/encode_bench.py --direct-only --formats mp3
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import av
import numpy as np

from polyvox.audio.decode import audio_duration
from polyvox.audio.encode import StreamEncoder
from polyvox.audio.formats import FORMATS
from polyvox.audio.pipeline import OutputPipeline
from polyvox.audio.resample import Resampler, resample_clip
from polyvox.runtime.cpus import usable_cpus
from polyvox.server.speech.encode_pool import EncodePool

ENGINE_RATE = 48_000
SERVED_RATE = 24_000
CHUNK_S = 0.16
TARGET_STREAMS = 256
PROBE_S = 0.005


@dataclass
class Run:
    format: str
    pitch: float
    threads: int
    streams: int
    seconds: float
    chunks: int
    chunks_per_s: float
    real_time_streams: int
    keeps_up_with_256: bool
    cores_busy: float
    cpu_ms_per_chunk: float
    cores_for_256: float
    loop_lag_p50_ms: float
    loop_lag_max_ms: float
    direct_chunks_per_s: float
    decoded_s: float
    encoded_s: float


def speech_like(seconds: float, rate: int) -> np.ndarray:
    """Voiced sound a codec works on as it does on speech: harmonics of a gliding 100-220 Hz pitch,
    syllable-rate loudness, a little breath noise (a pure tone or silence would flatter the encoders)."""
    t = np.arange(int(seconds * rate)) / rate
    pitch = 160 + 60 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4.0 * t) ** 2
    noise = np.random.default_rng(0).standard_normal(t.size) * 0.02
    return (0.2 * voiced * envelope + noise).astype(np.float32)


def engine_chunks(count: int) -> list[np.ndarray]:
    size = round(CHUNK_S * ENGINE_RATE)
    audio = speech_like(count * CHUNK_S, ENGINE_RATE)
    return [audio[i * size : (i + 1) * size] for i in range(count)]


class Streams:
    """`count` responses encoding through one pool: counters, and stream 0's bytes for the check."""

    def __init__(
        self, fmt: str, count: int, pool: EncodePool, chunks: list[np.ndarray], pitch: float = 0.0
    ) -> None:
        self.fmt, self.count, self.pool, self.chunks, self.pitch = fmt, count, pool, chunks, pitch
        self.encoded = 0
        self.first_stream_chunks = 0
        self.first_stream_bytes: list[bytes] = []
        self.stop = asyncio.Event()

    async def one(self, index: int) -> None:
        pipeline = await self.pool.run(
            functools.partial(OutputPipeline, ENGINE_RATE, SERVED_RATE, self.fmt, pitch=self.pitch)
        )
        position = index * 7  # streams start at different places in the sound
        while not self.stop.is_set():
            data = await self.pool.run(pipeline.push, self.chunks[position % len(self.chunks)])
            position += 1
            self.encoded += 1
            if index == 0:
                self.first_stream_chunks += 1
                self.first_stream_bytes.append(data)
        tail = await self.pool.run(pipeline.finish)
        if index == 0:
            self.first_stream_bytes.append(tail)


async def loop_lag(stop: asyncio.Event, lags: list[float]) -> None:
    """How late the event loop wakes from short sleeps: what every other request would wait."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(PROBE_S)
        lags.append(time.perf_counter() - started - PROBE_S)


def decoded_seconds(fmt: str, data: bytes) -> float:
    if fmt == "pcm":
        return len(data) / 2 / SERVED_RATE
    return audio_duration(data)


def direct_rate(
    fmt: str, streams: int, chunks: list[np.ndarray], seconds: float, pitch: float = 0.0
) -> float:
    """Chunks per second with no pool: the same pipelines pushed round-robin on this thread."""
    count = min(streams, 32)
    pipelines = [OutputPipeline(ENGINE_RATE, SERVED_RATE, fmt, pitch=pitch) for _ in range(count)]
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for pipeline in pipelines:
            pipeline.push(chunks[done % len(chunks)])
            done += 1
    return done / (time.perf_counter() - started)


async def measure(
    fmt: str, threads: int, streams: int, seconds: float, warmup_s: float, direct: float, pitch: float = 0.0
) -> Run:
    chunks = engine_chunks(64)
    pool = EncodePool(threads)
    load = Streams(fmt, streams, pool, chunks, pitch)
    tasks = [asyncio.create_task(load.one(i)) for i in range(streams)]
    await asyncio.sleep(warmup_s)
    lags: list[float] = []
    probe_stop = asyncio.Event()
    probe = asyncio.create_task(loop_lag(probe_stop, lags))
    chunks_before, cpu_before, started = load.encoded, time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    chunks_done, cpu_used = load.encoded - chunks_before, time.process_time() - cpu_before
    wall = time.perf_counter() - started
    probe_stop.set()
    load.stop.set()
    await asyncio.gather(probe, *tasks)
    rate = round(chunks_done / wall, 1)  # as reported: the streams below are derived from this figure
    encoded_s = load.first_stream_chunks * CHUNK_S
    return Run(
        format=fmt,
        pitch=pitch,
        threads=threads,
        streams=streams,
        seconds=round(wall, 2),
        chunks=chunks_done,
        chunks_per_s=rate,
        real_time_streams=int(rate * CHUNK_S),
        keeps_up_with_256=rate * CHUNK_S >= TARGET_STREAMS,
        cores_busy=round(cpu_used / wall, 2),
        cpu_ms_per_chunk=round(1000 * cpu_used / max(chunks_done, 1), 3),
        cores_for_256=round(cpu_used / max(chunks_done, 1) * TARGET_STREAMS / CHUNK_S, 2),
        loop_lag_p50_ms=round(1000 * statistics.median(lags), 2) if lags else 0.0,
        loop_lag_max_ms=round(1000 * max(lags), 2) if lags else 0.0,
        direct_chunks_per_s=round(direct, 1),
        decoded_s=round(decoded_seconds(fmt, b"".join(load.first_stream_bytes)), 3),
        encoded_s=round(encoded_s, 3),
    )


def wake_lateness_beside(call: Callable[[], object], seconds: float) -> float:
    """The latest a 1 ms sleep of this thread woke, in ms past its time, while another thread made
    `call` over and over for `seconds`."""
    stop = threading.Event()

    def repeat() -> None:
        while not stop.is_set():
            call()

    worker = threading.Thread(target=repeat)
    worker.start()
    late = 0.0
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        started = time.perf_counter()
        time.sleep(0.001)
        late = max(late, 1000 * (time.perf_counter() - started) - 1.0)
    stop.set()
    worker.join()
    return late


def lock_check(seconds: float = 1.0, clip_s: int = 120) -> list[dict]:
    """Does a long FFmpeg or soxr call hold the interpreter lock? A thread makes the call over and over
    while this one sleeps 1 ms at a time: a call that held the lock for its D ms would make some
    wake-up D ms late; one that releases it leaves them within the interpreter's 5 ms switch interval.
    A `clip_s` of 120 makes calls of tens to hundreds of ms, far above the 5 ms interval."""
    clip = speech_like(clip_s, ENGINE_RATE)
    encoded_s = clip_s // 6
    served = clip[: encoded_s * ENGINE_RATE : 2].copy()
    resampler = Resampler(ENGINE_RATE, SERVED_RATE)
    encoder = StreamEncoder("mp3", SERVED_RATE)
    calls: list[tuple[str, Callable[[], object]]] = [
        (f"soxr HQ, {clip_s} s 48->16 kHz (voice clips)", lambda: resample_clip(clip, ENGINE_RATE, 16_000)),
        (f"PyAV swresample, {clip_s} s 48->24 kHz (responses)", lambda: resampler.process(clip)),
        (f"PyAV libmp3lame encode, {encoded_s} s at 24 kHz", lambda: encoder.encode(served)),
    ]
    results = []
    for name, call in calls:
        started = time.perf_counter()
        call()
        call_ms = 1000 * (time.perf_counter() - started)
        late_ms = wake_lateness_beside(call, max(seconds, 6 * call_ms / 1000))
        results.append(
            {
                "call": name,
                "call_ms": round(call_ms, 1),
                "wake_late_max_ms": round(late_ms, 1),
                "releases_lock": late_ms < call_ms / 2,
            }
        )
    return results


def machine() -> dict:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    except OSError:
        names = []
    model = names[0] if names else platform.processor()
    return {
        "cpu": model,
        "usable_cpus": usable_cpus(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "pyav": av.__version__,
        "ffmpeg": av.library_versions.get("libavcodec"),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default=",".join(FORMATS), help="response formats, comma-separated")
    parser.add_argument(
        "--threads",
        default=str(usable_cpus()),
        help="pool sizes to try, comma-separated (the server's default is one per usable core)",
    )
    parser.add_argument("--streams", type=int, default=TARGET_STREAMS, help="streams encoding at once")
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring window per format and pool")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before the window opens")
    parser.add_argument(
        "--dry-run", action="store_true", help="4 streams, short windows and clips: checks it runs"
    )
    parser.add_argument(
        "--direct-only",
        action="store_true",
        help="only the plain loop on this thread, for a sampling profiler (py-spy --gil: the share of an "
        "encode that holds the interpreter lock)",
    )
    parser.add_argument(
        "--lock-check",
        action="store_true",
        help="first check that FFmpeg and soxr release the interpreter lock",
    )
    parser.add_argument(
        "--pitch", type=float, default=0.0, help="semitones every stream is shifted by (the request's pitch)"
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.streams, args.seconds, args.warmup = 4, 0.15, 0.05
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    formats = args.formats.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    runs: list[Run] = []
    locks = (lock_check(0.2, clip_s=12) if args.dry_run else lock_check()) if args.lock_check else []
    for lock in locks:
        verdict = "releases" if lock["releases_lock"] else "HOLDS"
        print(
            f"{lock['call']}: one call {lock['call_ms']} ms, a 1 ms sleep woke at most "
            f"{lock['wake_late_max_ms']} ms late: {verdict} the lock",
            flush=True,
        )
    if not args.direct_only:
        print(
            f"{'format':>6} {'threads':>7} {'chunks/s':>9} {'streams@RT':>10} {'256?':>5} {'cores':>5} "
            f"{'cpu ms/chunk':>12} {'cores@256':>9} {'lag p50/max ms':>15} {'direct/s':>9}",
            flush=True,
        )
    for fmt in formats:
        direct = direct_rate(fmt, args.streams, engine_chunks(64), args.seconds, args.pitch)
        if args.direct_only:
            print(f"{fmt:>6} direct {direct:.0f} chunks/s", flush=True)
            continue
        for count in threads:
            run = asyncio.run(
                measure(fmt, count, args.streams, args.seconds, args.warmup, direct, args.pitch)
            )
            runs.append(run)
            print(
                f"{run.format:>6} {run.threads:>7} {run.chunks_per_s:>9.0f} {run.real_time_streams:>10} "
                f"{'yes' if run.keeps_up_with_256 else 'no':>5} {run.cores_busy:>5.2f} "
                f"{run.cpu_ms_per_chunk:>12.3f} {run.cores_for_256:>9.2f} "
                f"{run.loop_lag_p50_ms:>7.2f}/{run.loop_lag_max_ms:<7.1f} "
                f"{run.direct_chunks_per_s:>9.0f}",
                flush=True,
            )
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
        "engine_rate": ENGINE_RATE,
        "served_rate": SERVED_RATE,
        "chunk_s": CHUNK_S,
        "lock_check": locks,
        "runs": [asdict(run) for run in runs],
    }
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
