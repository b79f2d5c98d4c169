"""The cost of LoRA adapters in a batch: the same burst of C requests through polyvox's batching engine
with no adapter, with one adapter for all, and mixed (round-robin over two adapters and none: the
multi-LoRA case), interleaved in one run so drift hits every scenario alike. Reported per scenario:
audio-seconds per wall-second, mean step time, and the ratio to the no-adapter burst.

Adapters are random, in the official on-disk format, of rank `--rank` on the LMs' and the LocDiT's
q/k/v/o (the official fine-tuning default). Run with PYTHONPATH=src if polyvox is not installed.

    python bench/lora_bench.py --size tiny --device cpu --concurrency 16 --patches 8 --json out.json
    python bench/lora_bench.py --size full --device cuda --concurrency 16,64 --patches 63
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import torch
from engine_bench import PATCH_S, SIZES, build_model, make_prompt, sync

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams, SequenceStatus
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter

SCENARIOS = {"none": [None], "one": ["a"], "mixed": ["a", "b", None]}


def burst(core: EngineCore, prompts, adapters: list[str | None], patches: int, timesteps: int, device):
    sync(device)
    t0 = time.perf_counter()
    seqs = [
        core.add_request(
            p,
            SamplingParams(
                seed=i,
                min_len=patches,
                max_len=patches,
                inference_timesteps=timesteps,
                adapter=adapters[i % len(adapters)],
            ),
        )
        for i, p in enumerate(prompts)
    ]
    steps0, time0 = core._steps, core._step_time
    while any(s.status is not SequenceStatus.FINISHED for s in seqs):
        core.step()
    sync(device)
    wall = time.perf_counter() - t0
    steps = core._steps - steps0
    return {
        "wall_s": wall,
        "audio_s": len(seqs) * patches * PATCH_S,
        "step_ms": 1000 * (core._step_time - time0) / steps,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--concurrency", default="16")
    parser.add_argument("--patches", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=10)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--max-loaded", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = (
        getattr(torch, args.dtype)
        if args.dtype
        else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    )
    config, lm, vae = build_model(args.size, device, dtype)
    bank = lm.serve_adapters(max_loaded=args.max_loaded, max_rank=args.rank)
    lora = AdapterConfig(enable_lm=True, enable_dit=True, r=args.rank, alpha=2 * args.rank)
    with tempfile.TemporaryDirectory() as tmp:
        for seed, name in enumerate(("a", "b")):
            bank.register(
                name, write_random_adapter(lm, Path(tmp) / name, lora, lm.lora_default_proj, seed=seed)
            )
    results = []
    for concurrency in [int(c) for c in args.concurrency.split(",")]:
        core = EngineCore(lm, vae, config, BatchingConfig(max_num_seqs=max(concurrency, 1)), device, dtype)
        prompts = [make_prompt(config, i, 1) for i in range(concurrency)]
        burst(core, prompts[:2], SCENARIOS["mixed"], 2, args.timesteps, device)  # warm-up, graphs captured
        runs: dict[str, list[dict]] = {name: [] for name in SCENARIOS}
        for _ in range(args.repeats):
            for name, adapters in SCENARIOS.items():
                runs[name].append(burst(core, prompts, adapters, args.patches, args.timesteps, device))
        base = statistics.median(r["audio_s"] / r["wall_s"] for r in runs["none"])
        for name, rs in runs.items():
            rate = statistics.median(r["audio_s"] / r["wall_s"] for r in rs)
            row = {
                "scenario": name,
                "concurrency": concurrency,
                "audio_s_per_s": round(rate, 2),
                "vs_none": round(rate / base, 3),
                "step_ms": round(statistics.median(r["step_ms"] for r in rs), 2),
            }
            results.append(row)
            print(json.dumps(row), flush=True)
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "device": str(device) + (f" {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "size": args.size,
        "dtype": str(dtype).removeprefix("torch."),
        "patches": args.patches,
        "timesteps": args.timesteps,
        "rank": args.rank,
        "adapter_slot_bytes": bank.nbytes,
        "results": results,
    }
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
