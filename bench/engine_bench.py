"""In-process benchmark of polyvox's continuous-batching VoxCPM2 engine (no server, no PyAV).

For each concurrency C, C requests arrive together, each forced to exactly `--patches` patches
(min_len = max_len; random weights make the stop head meaningless). Reported per C: aggregate
audio-seconds per wall-second, time to first audio (first 160 ms chunk) p50/p95, per-request RTF
((end - first audio) / audio duration), mean batch size and step time. Concurrency 1 gives the
single-stream RTF. Needs only torch, numpy, safetensors/tokenizers-free polyvox modules and
pydantic (the model config); run with PYTHONPATH=src if polyvox is not installed.

    python bench/engine_bench.py --size tiny --device cpu --concurrency 1,4 --patches 8 --json out.json
    python bench/engine_bench.py --size full --device cuda --concurrency 1,16,64 --patches 63
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime

import torch

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams, SequenceStatus
from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.prompt import build_prompt
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM

TEXT = "The quick brown fox jumps over the lazy dog while the band plays on. "
PATCH_S = 0.16


SIZES = ("tiny", "full-depth", "full")


def config_for(size: str) -> VoxCPM2Config:
    """tiny, full, or full-depth: every layer count of the full model with the tiny one's widths (so
    a step runs as many operators as the full model's, cheaply: a CPU stand-in for launch-bound GPU
    steps; the VAE's depth does not change with its size)."""
    if size == "tiny":
        return VoxCPM2Config.tiny()
    full = VoxCPM2Config.full()
    if size == "full":
        return full
    if size != "full-depth":
        raise ValueError(f"size must be one of {', '.join(SIZES)}")
    data = VoxCPM2Config.tiny().model_dump()
    data["lm_config"]["num_hidden_layers"] = full.lm_config.num_hidden_layers
    data["residual_lm_num_layers"] = full.residual_lm_num_layers
    data["encoder_config"]["num_layers"] = full.encoder_config.num_layers
    data["dit_config"]["num_layers"] = full.dit_config.num_layers
    return VoxCPM2Config.model_validate(data)


def env_kv_blocks() -> int | None:
    """The KV pool's size in blocks as `polyvox serve` reads its `num_kv_blocks` setting (where
    POLYVOX_NUM_KV_BLOCKS sets it), else None: sized from the device's memory (on a CPU, 2 GiB)."""
    from polyvox.settings import Settings

    return Settings().num_kv_blocks


def build_model(size: str, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """Random weights drawn on the device: matrices N(0, 0.02), norms 1, biases 0 (as the anchors)."""
    config = config_for(size)
    torch.manual_seed(seed)
    with torch.device(device):
        lm = VoxCPM2LM(config)
        with torch.no_grad():
            for name, p in lm.named_parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.02)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    p.fill_(1.0)
        vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config))
    return config, lm.to(dtype).eval(), vae.eval()


def make_prompt(config: VoxCPM2Config, i: int, repeats: int):
    vocab = config.lm_config.vocab_size

    def tokenize(text: str) -> list[int]:
        return [110 + ord(c) % (vocab - 120) for c in text]

    return build_prompt(
        tokenize, f"{i}: " + TEXT * repeats, patch_size=config.patch_size, feat_dim=config.feat_dim
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_burst(core: EngineCore, prompts, patches: int, timesteps: int, device) -> dict:
    sync(device)
    t0 = time.perf_counter()
    seqs = [
        core.add_request(
            p, SamplingParams(seed=i, min_len=patches, max_len=patches, inference_timesteps=timesteps)
        )
        for i, p in enumerate(prompts)
    ]
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    steps0, patches0, time0 = core._steps, core._patches, core._step_time
    while any(s.status is not SequenceStatus.FINISHED for s in seqs):
        outs = core.step()  # audio comes back on the host, so the step is complete here
        now = time.perf_counter() - t0
        for o in outs:
            first.setdefault(o.seq_id, now)
            last[o.seq_id] = now
    wall = time.perf_counter() - t0
    audio_s = len(seqs) * patches * PATCH_S
    ttfa = sorted(first.values())
    rtf = [(last[s.seq_id] - first[s.seq_id]) / (patches * PATCH_S) for s in seqs]
    steps = core._steps - steps0
    return {
        "concurrency": len(seqs),
        "wall_s": round(wall, 3),
        "audio_s": round(audio_s, 2),
        "audio_s_per_s": round(audio_s / wall, 2),
        "ttfa_p50_s": round(statistics.median(ttfa), 4),
        "ttfa_p95_s": round(ttfa[min(len(ttfa) - 1, int(0.95 * len(ttfa)))], 4),
        "rtf_mean": round(statistics.mean(rtf), 4),
        "rtf_max": round(max(rtf), 4),
        "steps": steps,
        "mean_batch": round((core._patches - patches0) / max(steps, 1), 2),
        "mean_step_ms": round(1000 * (core._step_time - time0) / max(steps, 1), 2),
    }


def run_closed_loop(
    core: EngineCore, make, concurrency: int, total: int, patches: int, timesteps: int, device
):
    """Requests keep arriving: `concurrency` are in flight and each one that finishes is replaced at
    once, until `total` have run. Lengths vary (half to all of `patches`), so arrivals land in
    running batches — the workload where a prefill policy matters. Gaps are between one stream's
    successive chunks; a stream stalls when a chunk arrives after a real-time listener needed it."""
    sync(device)
    t0 = time.perf_counter()
    lengths = [patches // 2 + (i * 7) % (patches - patches // 2 + 1) for i in range(total)]
    arrived: dict[int, float] = {}
    chunks: dict[int, list[float]] = {}
    seqs = []

    def arrive() -> None:
        i = len(seqs)
        params = SamplingParams(seed=i, min_len=lengths[i], max_len=lengths[i], inference_timesteps=timesteps)
        seq = core.add_request(make(i), params)
        seqs.append(seq)
        arrived[seq.seq_id] = time.perf_counter() - t0
        chunks[seq.seq_id] = []

    while len(seqs) < min(concurrency, total):
        arrive()
    while core.has_work():
        outs = core.step()
        now = time.perf_counter() - t0
        for o in outs:
            chunks[o.seq_id].append(now)
            if o.finished and len(seqs) < total:
                arrive()
    wall = time.perf_counter() - t0
    ttfa = sorted(chunks[s][0] - arrived[s] for s in chunks)
    gaps = sorted(b - a for times in chunks.values() for a, b in itertools.pairwise(times))
    stalled = sum(any(t > times[0] + i * PATCH_S for i, t in enumerate(times)) for times in chunks.values())

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "workload": "closed",
        "prefill_policy": core.config.prefill_policy,
        "concurrency": concurrency,
        "requests": total,
        "wall_s": round(wall, 3),
        "audio_s_per_s": round(sum(lengths) * PATCH_S / wall, 2),
        "ttfa_p50_s": round(statistics.median(ttfa), 4),
        "ttfa_p95_s": round(pct(ttfa, 0.95), 4),
        "gap_p50_ms": round(1000 * statistics.median(gaps), 1),
        "gap_p99_ms": round(1000 * pct(gaps, 0.99), 1),
        "gap_max_ms": round(1000 * gaps[-1], 1),
        "stalled_streams": stalled,
    }


def check(device: torch.device) -> dict:
    """Correctness on this device (tiny, fp32): batched vs alone, CUDA graphs vs eager, vs the batch-1
    generator. Returns the largest latent differences."""
    from polyvox.models.generate import generate_latent_sequence

    config, lm, vae = build_model("tiny", device, torch.float32)
    prompts = [make_prompt(config, i, 1 + i % 3) for i in range(12)]
    params = [
        SamplingParams(seed=i, min_len=4 + i % 5, max_len=4 + i % 5, cfg_value=1.5 + i % 3) for i in range(12)
    ]

    def run(graphs: bool, batch: bool):
        ec = BatchingConfig(num_kv_blocks=1024, cuda_graphs=graphs, max_graph_batch=16)
        if batch:
            return EngineCore(lm, vae, config, ec, device, torch.float32).generate(prompts, params)
        core = EngineCore(lm, vae, config, ec, device, torch.float32)
        return [core.generate([p], [sp])[0] for p, sp in zip(prompts, params, strict=True)]

    def diff(a, b):
        return max(float((x[0] - y[0]).abs().max()) for x, y in zip(a, b, strict=True))

    def audio_diff(a, b):
        return max(float(abs(x[1] - y[1]).max()) for x, y in zip(a, b, strict=True))

    eager_alone = run(False, False)
    reference = [
        generate_latent_sequence(
            lm, p, seed=sp.seed, min_len=sp.min_len, max_len=sp.max_len, cfg_value=sp.cfg_value
        )
        .float()
        .cpu()
        for p, sp in zip(prompts, params, strict=True)
    ]
    out = {
        "batched_vs_alone": diff(run(False, True), eager_alone),
        "alone_vs_batch1_generator": diff(eager_alone, [(r, None) for r in reference]),
    }
    if device.type == "cuda":
        graphed = run(True, True)
        out["graphs_batched_vs_eager_alone"] = diff(graphed, eager_alone)
        out["graphs_audio_vs_eager_alone"] = audio_diff(graphed, eager_alone)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=SIZES, default="tiny")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["auto", "bfloat16", "float32"], default="auto")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--patches", type=int, default=63, help="patches per request (63 = 10.08 s)")
    ap.add_argument("--text-repeats", type=int, default=3, help="prompt length, in copies of the pangram")
    ap.add_argument("--timesteps", type=int, default=10)
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument(
        "--num-kv-blocks",
        type=int,
        default=env_kv_blocks(),
        help="the KV pool in blocks (default: POLYVOX_NUM_KV_BLOCKS, else sized from the device's memory)",
    )
    ap.add_argument("--no-cuda-graphs", action="store_true")
    ap.add_argument("--no-audio", action="store_true", help="skip the VAE decode (LM side only)")
    ap.add_argument("--prefill-policy", choices=["mixed", "separate", "adaptive"], default="mixed")
    ap.add_argument("--attention", choices=["auto", "sdpa", "flash"], default="auto")
    ap.add_argument("--compile", action="store_true", help="torch.compile LocEnc and LocDiT (as at start)")
    ap.add_argument(
        "--closed-loop",
        type=int,
        default=0,
        metavar="N",
        help="instead of bursts: keep C requests in flight, replacing each that ends, until N have run",
    )
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--check", action="store_true", help="first check batched/graph outputs on this device")
    ap.add_argument("--phases", action="store_true", help="time each phase of a step (adds syncs)")
    ap.add_argument("--torch-profile", action="store_true", help="print the top ops of the last run")
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    dtype_name = args.dtype if args.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    dtype = getattr(torch, dtype_name)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    results: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or "cpu",
        "torch": torch.__version__,
        "command": " ".join(sys.argv),
        "size": args.size,
        "dtype": dtype_name,
        "patches": args.patches,
        "audio_s_per_request": round(args.patches * PATCH_S, 2),
        "timesteps": args.timesteps,
        "cuda_graphs": device.type == "cuda" and not args.no_cuda_graphs,
        "audio_decode": not args.no_audio,
        "prefill_policy": args.prefill_policy,
    }
    if args.check:
        results["check_max_latent_diff"] = check(device)
        print(json.dumps(results["check_max_latent_diff"]), flush=True)
    t = time.perf_counter()
    config, lm, vae = build_model(args.size, device, dtype)
    results["build_s"] = round(time.perf_counter() - t, 1)
    core_config = BatchingConfig(
        max_num_seqs=max(args.max_num_seqs, max(concurrencies)),
        num_kv_blocks=args.num_kv_blocks,
        cuda_graphs=not args.no_cuda_graphs,
        decode_audio=not args.no_audio,
        max_graph_batch=max(concurrencies),
        prefill_policy=args.prefill_policy,
        attention_backend=args.attention,
        compile=args.compile,
    )
    t = time.perf_counter()
    core = EngineCore(lm, vae, config, core_config, device, dtype)
    results["kv_blocks"] = core.block_manager.num_blocks
    results["attention_backend"] = core.runner.attention_backend
    results["compiled"] = core.runner.compiled
    results["engine_start_s"] = round(time.perf_counter() - t, 1)
    prompt_tokens = len(make_prompt(config, 0, args.text_repeats))
    results["prompt_tokens"] = prompt_tokens
    print(json.dumps(results), flush=True)

    runs = []
    for c in concurrencies:
        prompts = [make_prompt(config, i, args.text_repeats) for i in range(c)]
        t = time.perf_counter()
        run_burst(core, prompts, 3, args.timesteps, device)  # warm-up (and CUDA-graph capture) at this size
        warm = time.perf_counter() - t
        if args.phases:
            core.runner.timings = {}
        profiler = torch.profiler.profile() if args.torch_profile and c == concurrencies[-1] else None
        if profiler:
            profiler.__enter__()
        if args.closed_loop:

            def make(i):
                return make_prompt(config, 1000 + i, args.text_repeats)

            result = run_closed_loop(core, make, c, args.closed_loop, args.patches, args.timesteps, device)
        else:
            result = run_burst(core, prompts, args.patches, args.timesteps, device)
        if profiler:
            profiler.__exit__(None, None, None)
            sort = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
            print(profiler.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=60))
        if args.phases:
            result["phase_ms_per_step"] = {
                k: round(1000 * v / result["steps"], 2) for k, v in core.runner.timings.items()
            }
            core.runner.timings = None
        result["warmup_s"] = round(warm, 2)
        runs.append(result)
        print(json.dumps(result), flush=True)
    results["runs"] = runs
    single = next((r for r in runs if r["concurrency"] == 1), None)
    if single:
        results["single_stream_rtf"] = single["rtf_mean"]
        results["single_stream_ttfa_s"] = single["ttfa_p50_s"]
    stats = core.stats()
    results["kv_blocks_free_after"] = stats.kv_blocks_free
    # whether the CUDA graphs survived capture and their self-check (a failure falls back to eager)
    results["graphs_in_use"] = {
        "dit_solve": core.runner.graphs is not None and not core.runner.graphs.disabled,
        "lm_advance": core.runner.advance_graphs is not None and not core.runner.advance_graphs.disabled,
        "vae_decode": core.runner.vae_graphs is not None and not core.runner.vae_graphs.disabled,
    }
    results["prefix_cache_hit_rate"] = round(stats.prefix_cache_hit_rate, 3)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
