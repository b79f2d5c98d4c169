"""Side by side on one checkpoint, in one run: polyvox's batching engine at several concurrencies
against the official `voxcpm` package serving the same requests one after another (its only mode).

Both load the same checkpoint directory (default: a tiny random one written here) and produce
exactly `--patches` patches per request (min_len = max_len), audio decode included.

    python bench/cpu_compare.py --concurrency 1,4,16 --patches 16 --json out.json

`--compile` adds polyvox with `torch_compile` on (the official package compiles only on CUDA).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import platform
import sys
import tempfile
import time
import types
from datetime import UTC, datetime
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_bench  # noqa: E402

from polyvox.core.config import BatchingConfig  # noqa: E402
from polyvox.core.core import EngineCore  # noqa: E402
from polyvox.models.random_checkpoint import write_random_checkpoint  # noqa: E402
from polyvox.models.voxcpm2.loaded_model import VoxCPM2  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog while the band plays on."


def official_model(directory: Path):
    """The official implementation (its `import` wants torchaudio, which it does not use here)."""
    if "torchaudio" not in sys.modules:
        stub = types.ModuleType("torchaudio")
        stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = stub
    from voxcpm.model.voxcpm2 import VoxCPM2Model

    return VoxCPM2Model.from_local(str(directory), optimize=False, device="cpu")


def run_official(model, requests: int, patches: int) -> dict:
    t0 = time.perf_counter()
    first = None
    for i in range(requests):
        torch.manual_seed(i)
        start = time.perf_counter()
        for _chunk in model.generate_streaming(target_text=f"{i}: {TEXT}", min_len=patches, max_len=patches):
            if first is None:
                first = time.perf_counter() - start
    wall = time.perf_counter() - t0
    audio = requests * patches * engine_bench.PATCH_S
    return {
        "requests": requests,
        "wall_s": round(wall, 3),
        "audio_s": round(audio, 2),
        "audio_s_per_s": round(audio / wall, 2),
        "first_audio_s": round(first, 4),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help="checkpoint directory (default: a tiny random one)")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--patches", type=int, default=16)
    ap.add_argument("--official-requests", type=int, default=4)
    ap.add_argument("--compile", action="store_true", help="also run polyvox with torch.compile")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.checkpoint or tmp)
        if args.checkpoint is None:
            write_random_checkpoint(directory, size="tiny", seed=0)
        results: dict = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.node()} ({torch.get_num_threads()} torch threads)",
            "torch": torch.__version__,
            "command": " ".join(sys.argv),
            "checkpoint": args.checkpoint or "tiny random (polyvox checkpoint random --size tiny)",
            "patches": args.patches,
        }
        bundle = VoxCPM2.load(directory, device="cpu", dtype="float32")
        for compiled in (False, True) if args.compile else (False,):
            name = "polyvox_compiled" if compiled else "polyvox"
            started = time.perf_counter()
            core = EngineCore(
                bundle.lm,
                bundle.vae,
                bundle.config,
                BatchingConfig(num_kv_blocks=4096, compile=compiled),
                torch.device("cpu"),
                torch.float32,
            )
            results[f"{name}_engine_start_s"] = round(time.perf_counter() - started, 1)
            runs = []
            for c in [int(x) for x in args.concurrency.split(",")]:
                prompts = [bundle.build_prompt(f"{i}: {TEXT}") for i in range(c)]
                engine_bench.run_burst(core, prompts, 2, 10, torch.device("cpu"))
                run = engine_bench.run_burst(core, prompts, args.patches, 10, torch.device("cpu"))
                runs.append(run)
                print(name, json.dumps(run), flush=True)
            results[name] = runs
        model = official_model(directory)
        run_official(model, 1, 2)
        results["official_sequential"] = run_official(model, args.official_requests, args.patches)
        print("official", json.dumps(results["official_sequential"]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
