"""One-call GPU benchmark: CUDA smoke test, polyvox's engine table, a step profile, and the official
reference measured in the same run. Writes JSON under $OUT and prints a short summary last.

The device machine has torch, numpy, safetensors and tokenizers; bring the rest as Python 3.12
manylinux wheels in `.whl` (git-ignored): pydantic, pydantic-core, annotated-types,
typing-inspection, typing-extensions for polyvox's model config; for the served path (`polyvox
serve` and `polyvox bench`): fastapi, starlette, annotated-doc, opentelemetry-api, uvicorn, h11,
click, anyio, idna, python-multipart, pydantic-settings, python-dotenv, websockets, pyzmq, msgspec,
av, soxr, prometheus-client, httpx, httpcore, certifi, filelock, redis (imported, not connected;
av's wheel is the largest: mind the 64 MiB a device call carries); voxcpm==2.0.3, librosa==1.0.0,
soundfile, cffi, pycparser, soxr, audioread, pooch, decorator, platformdirs, standard-aifc,
standard-sunau for the reference; and copy `../shared/anchors/*.py` into `.anchors/` (git-ignored).
Then, as one call:

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site:src; python3 bench/gpu_bench.py     # carry: .whl, .anchors

Sections, in order of need (each skipped when the budget runs short): smoke (tiny, correctness
checks), the engine table, the served path (`bench/served_bench.py`: `polyvox serve --random-weights
SIZE`, its engine in a process of its own at DP=1, driven by `polyvox bench --stream` at
SERVED_CONCURRENCY, default 64, and reported beside the engine table's row at that concurrency), the
official reference (eager and compiled), a step profile, decode attention in both SDPA forms, the
engine with torch.compile at c=64, the two prefill policies under arriving load (mixed, adaptive,
separate).
`BUDGET_S` (default 480) bounds the whole run; `DEVICE=cpu SIZE=tiny` dry-runs it on a CPU;
`SECTIONS=smoke_tiny,engine_full,...` runs only those; SERVED_REQUESTS and SERVED_INPUT shorten the
served path's run (default: twice its concurrency, `polyvox bench`'s ~10 s paragraph), ENGINE_PATCHES
the engine table's requests (default 63 patches each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", "/tmp/polyvox-gpu"))
BUDGET_S = float(os.environ.get("BUDGET_S", "480"))
CONCURRENCY = os.environ.get("CONCURRENCY", "1,8,32,64,128,256,512")
DEVICE = os.environ.get("DEVICE", "cuda")  # DEVICE=cpu SIZE=tiny: a dry run of this script on a CPU
SIZE = os.environ.get("SIZE", "full")
SECTIONS = os.environ.get("SECTIONS", "")  # e.g. "smoke_tiny,engine_full": only these (default: all)
SERVED_CONCURRENCY = int(os.environ.get("SERVED_CONCURRENCY", "64"))
SERVED_REQUESTS = os.environ.get("SERVED_REQUESTS", "")  # default: twice the concurrency
SERVED_INPUT = os.environ.get("SERVED_INPUT", "")  # default: polyvox bench's ~10 s paragraph
ENGINE_PATCHES = os.environ.get("ENGINE_PATCHES", "63")  # each request's patches in the engine table
# The smoke's batch sizes: 1 and 8 on the GPU; on a CPU dry run the table's own (a batch of 8 of the tiny
# model takes 10-15 s of a loaded 2-core CI machine, where the smoke only proves the script runs).
SMOKE_CONCURRENCY = "1,8" if DEVICE == "cuda" else CONCURRENCY
T0 = time.monotonic()


def left() -> float:
    return BUDGET_S - (time.monotonic() - T0)


def run(name: str, cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run one section as a subprocess (a crash or hang in one section leaves the others standing)."""
    if SECTIONS and name not in SECTIONS.split(","):
        return {"rc": "skipped", "seconds": 0.0}
    # The sections' own limits share out the GPU's minutes; a CPU dry run (a test, on a loaded machine) is
    # bounded by the budget alone, so no section fails for the machine's speed.
    timeout = max(10.0, min(timeout, left()) if DEVICE == "cuda" else left())
    started = time.monotonic()
    log = OUT / f"{name}.log"
    print(f"== {name} (timeout {timeout:.0f}s): {' '.join(cmd)}", flush=True)
    try:
        with open(log, "w") as f:
            proc = subprocess.run(
                cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env={**os.environ, **(env or {})}
            )
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    took = round(time.monotonic() - started, 1)
    tail = log.read_text(errors="replace").splitlines()[-12:]
    print("\n".join(tail), flush=True)
    return {"rc": rc, "seconds": took}


def _timed(obj, attr: str, key: str, timings: dict[str, float], sync) -> None:
    """Wrap `obj.attr` so each call adds its synchronised wall time to `timings[key]`."""
    inner = getattr(obj, attr)

    def wrapper(*args, **kwargs):
        sync()
        t = time.perf_counter()
        out = inner(*args, **kwargs)
        sync()
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - t
        return out

    setattr(obj, attr, wrapper)


def _burst(core, prompts, patches: int) -> tuple[int, float]:
    from polyvox.core.sequence import SamplingParams, SequenceStatus

    seqs = [
        core.add_request(p, SamplingParams(seed=i, min_len=patches, max_len=patches))
        for i, p in enumerate(prompts)
    ]
    steps, total = 0, 0.0
    while any(s.status is not SequenceStatus.FINISHED for s in seqs):
        t = time.perf_counter()
        core.step()
        total += time.perf_counter() - t
        steps += 1
    return steps, total


def profile_section() -> None:
    """Where a step's time goes at a few batch sizes (full size, bf16): prefill, LM advance, LocDiT
    solve, VAE decode, and the rest — each stage timed with the device synchronised around it."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import engine_bench

    from polyvox.core.config import BatchingConfig
    from polyvox.core.core import EngineCore

    device = torch.device(DEVICE)
    size = SIZE
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    config, lm, vae = engine_bench.build_model(size, device, dtype)
    kv_blocks = engine_bench.env_kv_blocks()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    result = {}
    for batch in [int(b) for b in os.environ.get("PROFILE_BATCHES", "1,64,256").split(",")]:
        core = EngineCore(
            lm,
            vae,
            config,
            BatchingConfig(max_num_seqs=batch, max_graph_batch=batch, num_kv_blocks=kv_blocks),
            device,
            dtype,
        )
        runner = core.runner
        timings: dict[str, float] = {}
        _timed(runner, "_prefill", "prefill", timings, sync)
        _timed(runner, "_advance", "lm_advance", timings, sync)
        _timed(runner, "_decode_audio", "vae_decode", timings, sync)
        _timed(
            runner.graphs if runner.graphs is not None else runner.lm,
            "decode_patch",
            "dit_solve",
            timings,
            sync,
        )
        prompts = [engine_bench.make_prompt(config, i, 3) for i in range(batch)]
        _burst(core, prompts, 3)
        timings.clear()
        steps, total = _burst(core, prompts, 20)
        row = {key: round(1000 * value / steps, 2) for key, value in timings.items()}
        row["step_total"] = round(1000 * total / steps, 2)
        row["other"] = round(1000 * (total - sum(timings.values())) / steps, 2)
        row["steps"] = steps
        result[str(batch)] = row
        print("profile batch", batch, json.dumps(row), flush=True)
    (OUT / "profile.json").write_text(json.dumps(result, indent=1))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) > 1 and sys.argv[1] == "profile":
        profile_section()
        return
    py = sys.executable
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{os.environ.get('PYTHONPATH', '')}", "PYTHONUNBUFFERED": "1"}
    sections = {}
    if DEVICE == "cuda":
        subprocess.run(["nvidia-smi", "-L"])
    # in order of need: correctness, the table, the official reference, the profile, then the options
    sections["smoke_tiny"] = run(
        "smoke_tiny",
        [py, "bench/engine_bench.py", "--size", "tiny", "--device", DEVICE,
         "--concurrency", SMOKE_CONCURRENCY, "--patches", "8", "--check",
         "--json", str(OUT / "smoke_tiny.json")],
        60 if DEVICE == "cuda" else 180, env,
    )  # fmt: skip
    sections["engine_full"] = run(
        "engine_full",
        [py, "bench/engine_bench.py", "--size", SIZE, "--device", DEVICE, "--concurrency", CONCURRENCY,
         "--patches", ENGINE_PATCHES, "--max-num-seqs", "512", "--json", str(OUT / "engine_full.json")],
        left() - 270, env,
    )  # fmt: skip
    if left() > 150:  # HTTP + engine: the same machine's served throughput beside the engine's
        served = [py, "bench/served_bench.py", "--size", SIZE, "--device", DEVICE,
                  "--concurrency", str(SERVED_CONCURRENCY), "--json", str(OUT / "served.json")]  # fmt: skip
        served += ["--requests", SERVED_REQUESTS] if SERVED_REQUESTS else []
        served += ["--input", SERVED_INPUT] if SERVED_INPUT else []
        sections["served"] = run("served", served, min(150, left() - 120), env)
    anchors = ROOT / ".anchors" / "voxcpm_reference.py"
    if anchors.exists() and left() > 60:
        ref_budget = min(110, left() - 100)
        ref_env = {**env, "SIZE": SIZE, "OUT": str(OUT), "BUDGET_S": str(ref_budget - 10)}
        sections["official_reference"] = run("official_reference", [py, str(anchors)], ref_budget, ref_env)
    if left() > 40:
        sections["profile"] = run("profile", [py, __file__, "profile"], min(50, left() - 50), env)
    if left() > 30:  # decode attention: folded query heads vs SDPA's enable_gqa with a mask
        sections["attention"] = run(
            "attention",
            [py, "bench/attention_bench.py", "--device", DEVICE, "--batch", "1,64,256", "--context", "512",
             "--json", str(OUT / "attention.json")],
            min(40, left() - 20), env,
        )  # fmt: skip
    if left() > 45:  # torch.compile of LocEnc + LocDiT at start, then the c=64 row again
        sections["engine_compiled"] = run(
            "engine_compiled",
            [py, "bench/engine_bench.py", "--size", SIZE, "--device", DEVICE, "--concurrency", "64",
             "--patches", "63", "--compile", "--json", str(OUT / "engine_compiled.json")],
            min(120, left() - 5), env,
        )  # fmt: skip
    for policy in ("mixed", "adaptive", "separate"):  # requests arriving into running batches
        if left() > 40:
            sections[f"policy_{policy}"] = run(
                f"policy_{policy}",
                [py, "bench/engine_bench.py", "--size", SIZE, "--device", DEVICE, "--concurrency", "64",
                 "--patches", "32", "--closed-loop", "128", "--prefill-policy", policy,
                 "--json", str(OUT / f"policy_{policy}.json")],
                min(60, left() - 5), env,
            )  # fmt: skip
    summary = {"sections": sections, "total_s": round(time.monotonic() - T0, 1)}
    names = (
        "smoke_tiny",
        "engine_full",
        "served",
        "engine_compiled",
        "profile",
        "attention",
        "policy_mixed",
        "policy_adaptive",
        "policy_separate",
        f"voxcpm_reference_{SIZE}",
    )
    for name in names:
        path = OUT / f"{name}.json"
        if path.exists():
            summary[name] = json.loads(path.read_text())
    full, served = summary.get("engine_full", {}), summary.get("served", {})
    if served:  # served throughput over the engine alone's at the same concurrency
        alone = next((r for r in full.get("runs", []) if r["concurrency"] == served["concurrency"]), None)
        ratio = served["throughput_audio_s_per_s"] / alone["audio_s_per_s"] if alone else None
        summary["served_vs_engine"] = round(ratio, 3) if ratio is not None else None
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n==== SUMMARY ====")
    for r in full.get("runs", []):
        print(
            f"polyvox c={r['concurrency']:>4}: {r['audio_s_per_s']:>8} audio-s/s  ttfa p50 {r['ttfa_p50_s']}s"
            f" p95 {r['ttfa_p95_s']}s  rtf {r['rtf_mean']}  step {r['mean_step_ms']}ms"
        )
    if served:
        print(
            f"served   c={served['concurrency']:>4}: {served['throughput_audio_s_per_s']:>8.1f} audio-s/s"
            f"  ttfa p50 {served['ttfa_p50_s']:.3f}s p95 {served['ttfa_p95_s']:.3f}s"
            f"  viability {served['streaming_viability']}  errors {served['errors']}"
            f"  (polyvox serve, engine process, DP=1; served / engine alone: {summary['served_vs_engine']})"
        )
    compiled = summary.get("engine_compiled", {})
    for r in compiled.get("runs", []):
        print(
            f"compiled c={r['concurrency']:>4}: {r['audio_s_per_s']:>8} audio-s/s  ttfa {r['ttfa_p50_s']}s"
            f"  rtf {r['rtf_mean']}  step {r['mean_step_ms']}ms  (in use: {compiled.get('compiled')},"
            f" engine start {compiled.get('engine_start_s')}s)"
        )
    for policy in ("mixed", "adaptive", "separate"):
        for r in summary.get(f"policy_{policy}", {}).get("runs", []):
            print(
                f"prefill {policy:>8} (closed loop c={r['concurrency']}): {r['audio_s_per_s']} audio-s/s"
                f"  ttfa p50 {r['ttfa_p50_s']}s p95 {r['ttfa_p95_s']}s  gap p99 {r['gap_p99_ms']}ms"
            )
    ref = summary.get(f"voxcpm_reference_{SIZE}", {})
    for tag in ("eager", "compiled"):
        if f"{tag}_rtf" in ref:
            print(f"official {tag}: rtf {ref[f'{tag}_rtf']}  ttfa {ref.get(f'{tag}_stream_ttfa_s')}s")
    for r in summary.get("attention", {}).get("rows", []):
        print(f"attention b={r['batch']}: folded {r['folded_ms']}ms  enable_gqa {r['enable_gqa_ms']}ms")
    print("smoke:", summary.get("smoke_tiny", {}).get("check_max_latent_diff"))
    print("graphs in use:", full.get("graphs_in_use"), " attention:", full.get("attention_backend"))
    print("sections:", json.dumps(sections))


if __name__ == "__main__":
    main()
