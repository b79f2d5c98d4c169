"""Counts the PyTorch operators one decode step of the engine dispatches, by phase.

On the GPU an eager step is bound by kernel launches, not arithmetic (BENCHMARKS.md: the H200 step
costs the same at batch 1 and 64), so the number of operators a step dispatches is what an eager
step's time follows, and what a CUDA graph has to replay. The count does not depend on the width of
the model, only on its depth, so `--size full-depth` keeps the full model's layer counts with
narrow layers and runs on any CPU. View operators launch nothing and are counted apart.

    python bench/op_count.py --size full-depth --batch 1,16 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime

import torch
from engine_bench import SIZES, config_for
from torch.utils._python_dispatch import TorchDispatchMode

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams
from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.prompt import build_prompt
from polyvox.models.voxcpm2.model import VoxCPM2LM

PHASES = {"_prefill": "prefill", "_advance": "advance", "_solve": "dit_solve", "_decode_audio": "vae_decode"}


class OpCounter(TorchDispatchMode):
    """Counts dispatched operators under the current phase name (views apart)."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "other"
        self.ops: Counter[str] = Counter()
        self.views: Counter[str] = Counter()
        self.by_name: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.is_view and _aliases(out, args):  # `to` is a "view" only when it changes nothing
            self.views[self.phase] += 1
        else:
            self.ops[self.phase] += 1
            self.by_name[func.overloadpacket.__name__] += 1
        return out


def _aliases(out, args) -> bool:
    if not isinstance(out, torch.Tensor):
        return True
    storage = out.untyped_storage().data_ptr()
    return any(isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == storage for a in args)


def count_step(batch: int, size: str, timesteps: int, dtype: torch.dtype) -> dict:
    config = config_for(size)
    torch.manual_seed(0)
    lm = VoxCPM2LM(config).to(dtype).eval()
    vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config)).eval()
    core = EngineCore(lm, vae, config, BatchingConfig(num_kv_blocks=64 * batch + 64), "cpu", dtype)
    runner = core.runner
    counter = OpCounter()
    for method, phase in PHASES.items():
        original = getattr(runner, method)

        def wrapped(*args, _original=original, _phase=phase):
            previous, counter.phase = counter.phase, _phase
            try:
                return _original(*args)
            finally:
                counter.phase = previous

        setattr(runner, method, wrapped)

    def tokenize(text: str) -> list[int]:
        return [110 + ord(c) % 100 for c in text]

    for i in range(batch):
        prompt = build_prompt(
            tokenize, f"{i}: hello there", patch_size=config.patch_size, feat_dim=config.feat_dim
        )
        core.add_request(prompt, SamplingParams(seed=i, min_len=8, max_len=8, inference_timesteps=timesteps))
    core.step()  # prefills (and the first patch)
    core.step()  # the first full decode step: a patch's advance for everyone
    with counter:
        core.step()
    while core.has_work():
        core.step()
    return {
        "batch": batch,
        "ops": dict(counter.ops),
        "ops_total": sum(counter.ops.values()),
        "views_total": sum(counter.views.values()),
        "top_ops": dict(counter.by_name.most_common(12)),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=SIZES, default="full-depth")
    ap.add_argument("--batch", default="1,16")
    ap.add_argument("--timesteps", type=int, default=10)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "size": args.size,
        "timesteps": args.timesteps,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "steps": [
            count_step(int(b), args.size, args.timesteps, getattr(torch, args.dtype))
            for b in args.batch.split(",")
        ],
    }
    for step in results["steps"]:
        print(json.dumps(step), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
