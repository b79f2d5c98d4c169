"""What voice affinity buys under data parallel: the prefix-cache hit rate of a `DataParallelEngine`
(one engine process per rank, tiny random weights on the CPU by default) serving a workload of K cloned
voices, run twice with the same requests: routed as shipped (a request goes to the rank that last
served its voice while that rank's load is within `AFFINITY_MARGIN` of the least), then with affinity
off (least load alone). Each voice is a reference clip (seeded noise, with or without a transcript);
its requests share the clip's prompt blocks and differ in their text. Reported per run: the prefix-cache
hit rate over all ranks (hit blocks / queried blocks, from the ranks' batching counters), requests per
rank, requests routed by affinity, throughput and first-audio p50/p95. Writes every run as JSON and
prints the table BENCHMARKS.md keeps.

    python bench/affinity_bench.py --json bench/results/2026-11-30-cpu-affinity/affinity.json
    python bench/affinity_bench.py --voices 8 --requests 64 --concurrency 8 --max-patches 4
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polyvox.backends.base import ReferenceAudio, SynthesisRequest
from polyvox.core.config import BatchingConfig
from polyvox.engine.data_parallel import DataParallelEngine
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.router import AFFINITY_MARGIN, AFFINITY_MIN_SLACK

CLIP_RATE = 16000
TRANSCRIPT = "This is how my voice sounds when I read a sentence aloud."
SENTENCES = (
    "The train leaves at noon.",
    "Bring the blue umbrella, it may rain.",
    "She counted seven boats in the harbour.",
    "Our meeting moved to Thursday morning.",
    "The soup needs a little more salt.",
    "He fixed the bicycle in ten minutes.",
    "Turn left after the old bakery.",
    "Every lamp in the street was lit.",
)


def voice_clip(voice: int, seconds: float, transcript: bool) -> ReferenceAudio:
    """A clip only this voice has (seeded noise shaped by a tone), hashed by content like the server."""
    rng = np.random.default_rng(1000 + voice)
    t = np.arange(int(seconds * CLIP_RATE)) / CLIP_RATE
    tone = np.sin(2 * np.pi * (120 + 15 * voice) * t)
    samples = (0.3 * tone + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    digest = hashlib.sha256(samples.tobytes()).hexdigest()
    return ReferenceAudio(samples, CLIP_RATE, digest, TRANSCRIPT if transcript else None)


def workload(args: argparse.Namespace) -> list[SynthesisRequest]:
    """`requests` requests over `voices` voices, as many of each, in a seeded random order."""
    clips = [voice_clip(v, args.clip_seconds, args.transcripts) for v in range(args.voices)]
    voices = [n % args.voices for n in range(args.requests)]
    random.Random(args.seed).shuffle(voices)
    return [
        SynthesisRequest(
            # its own from the first word: a request shares its voice's blocks and nothing else
            text=f"Line {n}. {SENTENCES[n % len(SENTENCES)]}",
            reference=clips[voice],
            seed=n,
            max_patches=args.max_patches,
            min_patches=args.max_patches,  # random weights: the stop head means nothing, fix the length
            request_id=f"affinity-{n}",
        )
        for n, voice in enumerate(voices)
    ]


@dataclass
class Timing:
    first_audio_s: float
    total_s: float
    samples: int


async def one(engine: DataParallelEngine, request: SynthesisRequest) -> Timing:
    sent = time.perf_counter()
    first = None
    samples = 0
    async for chunk in engine.generate(request):
        if first is None and chunk.size:
            first = time.perf_counter() - sent
        samples += chunk.size
    total = time.perf_counter() - sent
    return Timing(first if first is not None else total, total, samples)


async def settled_stats(engine: DataParallelEngine, timeout_s: float = 10.0) -> list:
    """The ranks' batching counters once every rank has reported itself idle (counters final)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = [c.stats for c in engine.clients]
        if all(s is not None and s.running == 0 and s.waiting == 0 for s in stats):
            return stats
        if time.monotonic() > deadline:
            raise RuntimeError(f"the ranks did not report idle within {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


async def run_once(args: argparse.Namespace, kv_blocks: int, affinity: bool, output_rate: int) -> dict:
    spec = ModelSpec(random_weights=args.size, device=args.device)
    config = BatchingConfig(num_kv_blocks=kv_blocks)
    options = WorkerOptions(config=config, torch_threads=args.torch_threads)
    engine = DataParallelEngine([spec] * args.ranks, options, affinity=affinity)
    requests = workload(args)
    load_before = [round(x, 2) for x in os.getloadavg()]
    await engine.start()
    try:
        gate = asyncio.Semaphore(args.concurrency)

        async def limited(request: SynthesisRequest) -> Timing:
            async with gate:
                return await one(engine, request)

        started = time.perf_counter()
        timings = await asyncio.gather(*(limited(r) for r in requests))
        wall = time.perf_counter() - started
        stats = await settled_stats(engine)
        ranks = engine.ranks()
        prompts = engine.prompt_cache_stats()
    finally:
        await engine.stop()
    queries = sum(s.prefix_cache_queries for s in stats)
    hits = sum(s.prefix_cache_hits for s in stats)
    first = sorted(t.first_audio_s for t in timings)
    audio_s = sum(t.samples for t in timings) / output_rate
    return {
        "num_kv_blocks": kv_blocks,
        "affinity": affinity,
        "requests_per_rank": [r.routed_by_affinity + r.routed_by_load for r in ranks],
        "routed_by_affinity": sum(r.routed_by_affinity for r in ranks),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": hits / queries if queries else 0.0,
        "per_rank_hit_rate": [
            s.prefix_cache_hits / s.prefix_cache_queries if s.prefix_cache_queries else 0.0 for s in stats
        ],
        "preemptions": sum(s.preemptions for s in stats),
        "reference_encodes": prompts.encodes,
        "reference_encode_hits": prompts.hits,
        "wall_s": wall,
        "requests_per_s": len(requests) / wall,
        "audio_s_per_s": audio_s / wall,
        "first_audio_p50_s": statistics.median(first),
        "first_audio_p95_s": first[min(len(first) - 1, int(0.95 * len(first)))],
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def table(runs: list[dict]) -> str:
    header = (
        "| KV blocks per rank | affinity | prefix-cache hit rate (hits / queried blocks) "
        "| requests per rank | routed by affinity | reference encodes | requests/s | audio-s/s "
        "| first audio p50 / p95 | load avg before |"
    )
    rows = [header, "|" + "---|" * 10]
    for r in runs:
        rows.append(
            f"| {r['num_kv_blocks']} | {'on (as shipped)' if r['affinity'] else 'off (least load)'} "
            f"| {r['prefix_cache_hit_rate']:.1%} ({r['prefix_cache_hits']} / {r['prefix_cache_queries']}) "
            f"| {' / '.join(map(str, r['requests_per_rank']))} | {r['routed_by_affinity']} "
            f"| {r['reference_encodes']} | {r['requests_per_s']:.2f} | {r['audio_s_per_s']:.2f} "
            f"| {r['first_audio_p50_s'] * 1000:.0f} / {r['first_audio_p95_s'] * 1000:.0f} ms "
            f"| {r['load_average_before'][0]} |"
        )
    return "\n".join(rows)


def summary(runs: list[dict]) -> str:
    """Per KV pool and affinity setting: the hit rate's mean and range over the repeats."""
    rows = ["| KV blocks per rank | affinity | runs | hit rate mean (min-max) | routed by affinity, mean |"]
    rows.append("|" + "---|" * 5)
    for kv_blocks in dict.fromkeys(r["num_kv_blocks"] for r in runs):
        for affinity in (True, False):
            same = [r for r in runs if r["num_kv_blocks"] == kv_blocks and r["affinity"] == affinity]
            rates = [r["prefix_cache_hit_rate"] for r in same]
            routed = statistics.mean(r["routed_by_affinity"] for r in same)
            rows.append(
                f"| {kv_blocks} | {'on' if affinity else 'off'} | {len(same)} "
                f"| {statistics.mean(rates):.1%} ({min(rates):.1%}-{max(rates):.1%}) | {routed:.1f} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="tiny", help="random-weights size")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--ranks", type=int, default=2, help="data-parallel ranks (engine processes)")
    parser.add_argument("--voices", type=int, default=8, help="cloned voices (K)")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (C)")
    parser.add_argument("--max-patches", type=int, default=4, help="each output's length, forced")
    parser.add_argument("--clip-seconds", type=float, default=6.0, help="each voice's reference clip")
    parser.add_argument("--transcripts", action="store_true", help="clips with transcripts")
    parser.add_argument(
        "--num-kv-blocks",
        default="1024",
        help="each rank's KV pool; several, comma-separated: a pair of runs each",
    )
    parser.add_argument("--repeats", type=int, default=1, help="pairs of runs per KV pool")
    parser.add_argument("--torch-threads", type=int, default=1, help="per engine process")
    parser.add_argument("--seed", type=int, default=0, help="the workload's order")
    parser.add_argument("--json", type=Path, help="write the runs here")
    args = parser.parse_args()

    output_rate = ModelSpec(random_weights=args.size, device=args.device).source().sample_rate
    runs = []
    for kv_blocks in (int(n) for n in args.num_kv_blocks.split(",")):
        for _ in range(args.repeats):
            for affinity in (True, False):
                runs.append(asyncio.run(run_once(args, kv_blocks, affinity, output_rate)))
                print(json.dumps(runs[-1]), file=sys.stderr)
    print(table(runs))
    print()
    print(summary(runs))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "affinity_margin": AFFINITY_MARGIN,
            "affinity_min_slack": AFFINITY_MIN_SLACK,
            "runs": runs,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
