"""Every VoxCPM release polyvox serves, side by side in one run on the CPU: for each architecture
(voxcpm1 = VoxCPM-0.5B, voxcpm1.5, voxcpm2) a random checkpoint of one size is written, polyvox's
batching engine runs bursts at each concurrency, and the official `voxcpm` package (VoxCPMModel for
1.x, VoxCPM2Model for 2) serves the same requests one after another, its only mode. Every request
makes exactly `--patches` patches (min_len = max_len), audio decode included; audio seconds count
each release's own patch length (VoxCPM-0.5B: 80 ms, the others 160 ms). Each measurement runs
`--repeats` times and the run of median throughput is kept.

    python bench/arch_compare.py --concurrency 1,16 --patches 16 --json out.json
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import platform
import sys
import tempfile
import time
import types
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_compare  # noqa: E402
import engine_bench  # noqa: E402

from polyvox.core.config import BatchingConfig  # noqa: E402
from polyvox.core.core import EngineCore  # noqa: E402
from polyvox.models.architectures import ARCHS  # noqa: E402
from polyvox.models.model_source import checkpoint_source  # noqa: E402
from polyvox.models.random_checkpoint import write_random_checkpoint  # noqa: E402

TEXT = cpu_compare.TEXT
CPU = torch.device("cpu")


def official_model(arch: str, directory: Path):
    if arch == "voxcpm2":
        return cpu_compare.official_model(directory)
    if "torchaudio" not in sys.modules:  # imported by the official package, unused here, no wheel
        stub = types.ModuleType("torchaudio")
        stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = stub
    from voxcpm.model.voxcpm import VoxCPMModel

    return VoxCPMModel.from_local(str(directory), optimize=False, device="cpu")


def in_own_seconds(run: dict, patch_s: float) -> dict:
    """engine_bench counts 160 ms patches; recount audio (and the real-time factors) in `patch_s` ones."""
    scale = patch_s / engine_bench.PATCH_S
    audio = run["audio_s"] * scale
    return {
        **run,
        "audio_s": round(audio, 2),
        "audio_s_per_s": round(audio / run["wall_s"], 2),
        "rtf_mean": round(run["rtf_mean"] / scale, 4),
        "rtf_max": round(run["rtf_max"] / scale, 4),
    }


def median_run(runs: Iterable[dict]) -> dict:
    """The run of median throughput among repeats (a shared machine's load comes and goes)."""
    ordered = sorted(runs, key=lambda run: run["audio_s_per_s"])
    return {**ordered[len(ordered) // 2], "repeats": len(ordered)}


def bench_arch(arch: str, size: str, directory: Path, args: argparse.Namespace) -> dict:
    write_random_checkpoint(directory, size=size, seed=0, arch=arch)
    model = checkpoint_source(directory, device="cpu", dtype="float32").load()
    patch_s = model.patch_samples / model.sample_rate
    core = EngineCore(
        model.lm,
        model.vae,
        model.config,
        BatchingConfig(num_kv_blocks=4096),
        torch.device("cpu"),
        torch.float32,
    )
    result: dict = {"sample_rate": model.sample_rate, "patch_s": round(patch_s, 4), "polyvox": []}
    for c in [int(x) for x in args.concurrency.split(",")]:
        prompts = [model.build_prompt(f"{i}: {TEXT}") for i in range(c)]
        engine_bench.run_burst(core, prompts, 2, args.timesteps, CPU)  # warm-up
        run = median_run(
            in_own_seconds(engine_bench.run_burst(core, prompts, args.patches, args.timesteps, CPU), patch_s)
            for _ in range(args.repeats)
        )
        result["polyvox"].append(run)
        print(arch, "polyvox", json.dumps(run), flush=True)
    official = official_model(arch, directory)
    run_official(official, 1, 2, args.timesteps, patch_s)  # warm-up
    result["official_sequential"] = median_run(
        run_official(official, args.official_requests, args.patches, args.timesteps, patch_s)
        for _ in range(args.repeats)
    )
    print(arch, "official", json.dumps(result["official_sequential"]), flush=True)
    return result


def run_official(model, requests: int, patches: int, timesteps: int, patch_s: float) -> dict:
    t0 = time.perf_counter()
    first = None
    for i in range(requests):
        torch.manual_seed(i)
        start = time.perf_counter()
        chunks = model.generate_streaming(
            target_text=f"{i}: {TEXT}", min_len=patches, max_len=patches, inference_timesteps=timesteps
        )
        for _chunk in chunks:
            if first is None:
                first = time.perf_counter() - start
    wall = time.perf_counter() - t0
    audio = requests * patches * patch_s
    return {
        "requests": requests,
        "wall_s": round(wall, 3),
        "audio_s": round(audio, 2),
        "audio_s_per_s": round(audio / wall, 2),
        "first_audio_s": round(first or 0.0, 4),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=",".join(ARCHS), help="comma-separated releases (default: all)")
    ap.add_argument("--size", default="tiny", choices=("tiny", "full"))
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--patches", type=int, default=16)
    ap.add_argument("--timesteps", type=int, default=10, help="LocDiT solver steps (the official default)")
    ap.add_argument("--official-requests", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each measurement; the median is kept")
    ap.add_argument("--threads", type=int, default=None, help="PyTorch intra-op threads (default: its own)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({torch.get_num_threads()} torch threads, load average "
        f"{os.getloadavg()[0]:.1f} at the start)",
        "torch": torch.__version__,
        "command": " ".join(sys.argv),
        "size": args.size,
        "patches": args.patches,
        "archs": {},
    }
    for arch in args.arch.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            results["archs"][arch] = bench_arch(arch, args.size, Path(tmp), args)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
