"""Host overhead of an engine step: the real `EngineCore` step loop (scheduler, block manager, block
tables and slot mappings, the model runner's input tensors, output hand-off, and the outputs serialised
and sent the way they cross a process boundary) with the model's compute — the LMs' forward, the LocDiT
CFM solve, the stop head and the VAE decode — replaced by precomputed outputs. What is left is the
host's own time per step, the figure that must stay far below a GPU step of a few milliseconds.

Workloads: steady decode at each batch size (every row one new patch per step), and with `--mixed`
one steady batch where `--arrivals` requests finish and as many new prompts are prefilled every step.
Shapes are the tiny config's LM and latents (hidden 64, 4x16 latent patches) and the real VAE's audio
(7,680 float32 samples, 160 ms at 48 kHz, per row and step): the stub makes the model's size
irrelevant except through what crosses the host, and audio dominates that. The VAE decoder state's
gather and scatter count as device work (they run inside the VAE decode's CUDA graph). Between steps
the loop sleeps `--device-ms`, the device's step, while the receiving end drains the socket.

    python bench/host_overhead.py --batch 1,64,256,512 --mixed 256 --steps 50 --json out.json
    python bench/host_overhead.py --batch 256,512 --mixed 0 --wire chunks,views,frame
    python bench/host_overhead.py --gc-freeze  # as the engine process: the start-up heap frozen
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np
import torch
import zmq

from polyvox.backends.base import PromptCacheStats
from polyvox.core.config import BatchingConfig
from polyvox.core.core import BatchingStats, EngineCore, StepOutput
from polyvox.core.sequence import SamplingParams
from polyvox.engine.messages import Chunk, Outputs, encode
from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.prompt import Prompt
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM

PHASES = ("schedule", "inputs", "outputs", "serialise", "send")
# Phases are timed in CPU time of the engine thread: on a shared machine, time it spends descheduled
# is someone else's. Each step's wall time (less the stub's) is reported beside it.
clock = time.thread_time


# ---------------------------------------------------------------- what crosses the process boundary


class BytesChunk(msgspec.Struct, frozen=True, array_like=True):
    """A chunk carrying its own audio, as the engine process sent them before the step's audio went
    as one frame (`--wire chunks`, `--wire views`)."""

    key: int
    index: int
    finished: bool
    audio: bytes


class BytesOutputs(msgspec.Struct, frozen=True, tag="outputs"):
    chunks: list[BytesChunk]
    stats: BatchingStats
    prompts: PromptCacheStats


# frame: engine.messages as the engine process sends them: chunks naming their row, and the
#   step's audio array as a second, zero-copy frame [rows, samples];
# chunks: each row's audio copied to bytes inside its chunk (the format before that);
# views: the same built from memoryviews of the rows (msgpack copies them once).
WIRES = ("chunks", "views", "frame")


def step_frames(wire: str, outputs: list[StepOutput], core: EngineCore) -> list[Any]:
    """A step's outputs as the frames of one message to the API process."""
    stats, prompts = core.stats(), PromptCacheStats()
    if wire != "frame":
        audio = memoryview if wire == "views" else np.ndarray.tobytes
        chunks = [BytesChunk(o.seq_id, o.index, o.finished, audio(o.audio)) for o in outputs]
        return [encode(BytesOutputs(chunks, stats, prompts))]
    rows = outputs[0].step_audio if outputs else np.zeros((0, 0), dtype=np.float32)
    message = Outputs(
        [Chunk(o.seq_id, o.index, o.finished, o.row) for o in outputs], stats, prompts, rows.shape[1]
    )
    return [encode(message), rows]


class Wire:
    """A pyzmq PUSH socket over ipc:// with a receiver thread draining it, as the API process would."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        address = f"ipc://{self._dir.name}/engine"
        self._context = zmq.Context()
        pull = self._context.socket(zmq.PULL)
        pull.bind(address)
        self.socket = self._context.socket(zmq.PUSH)
        self.socket.connect(address)
        self._receiver = threading.Thread(target=self._drain, args=(pull,), daemon=True)
        self._receiver.start()

    @staticmethod
    def _drain(pull: Any) -> None:
        while True:
            frames = pull.recv_multipart(copy=False)
            if not frames[0].buffer.nbytes:  # the empty closing message
                pull.close()
                return

    def send(self, frames: list[Any]) -> None:
        self.socket.send_multipart(frames, copy=False)

    def close(self) -> None:
        self.socket.send(b"")
        self._receiver.join(5)
        self.socket.close()
        self._context.term()
        self._dir.cleanup()


# ---------------------------------------------------------------- the model, replaced


class PrecomputedModel:
    """Outputs of the right shapes, computed once, handed out as slices: installed on the tiny model's
    instances in place of the methods the model runner calls, so the runner's own code runs unchanged."""

    def __init__(self, lm: VoxCPM2LM, vae: AudioVAE, rows: int) -> None:
        config = lm.config
        hidden = config.lm_config.hidden_size
        generator = torch.Generator().manual_seed(0)
        self.hidden = torch.randn(rows, hidden, generator=generator)
        self.residual = torch.randn(rows, hidden, generator=generator)
        self.patches = torch.randn(rows, config.patch_size, config.feat_dim, generator=generator)
        self.stop = torch.tensor([[1.0, 0.0]]).expand(rows, 2)  # never votes to stop
        samples = config.patch_size * vae.decode_chunk_size
        self.audio = torch.randn(rows, samples, generator=generator) * 0.1
        self.seconds = 0.0  # spent in here: a stand-in for device time, excluded from the host's
        lm.prefill = self.timed(lambda *a: self._pair(a[4].num_seqs))  # a[4]: the attention metadata
        lm.advance = self.timed(lambda patch, *_: self._pair(patch.shape[0]))
        lm.decode_patch = self.timed(lambda h, *_: self.patches[: h.shape[0]])
        lm.stop_logits = self.timed(lambda h, *_: self.stop[: h.shape[0]])
        vae.decode_stream = self.timed(lambda latents, state: (self.audio[: latents.shape[0]], state))

    def _pair(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.hidden[:n], self.residual[:n]

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args)
            finally:
                self.seconds += clock() - t0

        return timed


class PhaseClock:
    """Seconds spent in a wrapped method, accumulated until read."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, owner: Any, name: str) -> None:
        fn = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += clock() - t0

        setattr(owner, name, timed)

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


# ---------------------------------------------------------------- the engine under test


def build_core(
    max_seqs: int, prompt_len: int, steps: int, freeze: bool = False
) -> tuple[EngineCore, PrecomputedModel]:
    """The engine over the stubbed model; `freeze`: then `gc.freeze()`, as the engine process does once
    its model is loaded."""
    config = VoxCPM2Config.tiny()
    torch.manual_seed(0)
    lm = VoxCPM2LM(config).eval()
    vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config)).eval()
    block_size = 16
    # every sequence holds its prompt and every patch of the run, with room for the mixed run's turnover
    blocks = 2 * max_seqs * ((prompt_len + steps + 2 * max_seqs) // block_size + 2)
    batching = BatchingConfig(
        max_num_seqs=max_seqs,
        kv_block_size=block_size,
        num_kv_blocks=blocks,
        cuda_graphs=False,
        enable_prefix_caching=True,
    )
    core = EngineCore(lm, vae, config, batching, torch.device("cpu"), torch.float32)
    model = PrecomputedModel(lm, vae, 2 * max_seqs + 8)
    # the decoder states' gather and scatter are device work inside the VAE decode's CUDA graph
    pool = core.runner.vae_pool
    pool.gather = model.timed(pool.gather)  # type: ignore[method-assign]
    pool.scatter = model.timed(pool.scatter)  # type: ignore[method-assign]
    if freeze:
        gc.freeze()
    return core, model


def make_prompt(config: VoxCPM2Config, i: int, length: int) -> Prompt:
    """A reference-clone-like prompt: a third text, the rest audio patches; distinct per request."""
    text = max(1, length // 3)
    generator = torch.Generator().manual_seed(i)
    tokens = torch.zeros(length, dtype=torch.long)
    tokens[:text] = torch.randint(110, 250, (text,), generator=generator)
    text_mask = torch.zeros(length, dtype=torch.long)
    text_mask[:text] = 1
    feats = torch.zeros(length, config.patch_size, config.feat_dim)
    feats[text:] = torch.randn(length - text, config.patch_size, config.feat_dim, generator=generator)
    empty = torch.zeros(0, config.patch_size, config.feat_dim)
    return Prompt(tokens, text_mask, 1 - text_mask, feats, empty, text)


class Harness:
    """Drives `core.step()` and splits each step's host time into phases."""

    def __init__(self, core: EngineCore, model: PrecomputedModel, wire: Wire, kind: str, device_s: float):
        self.core, self.model, self.wire, self.kind = core, model, wire, kind
        self.device_s = device_s
        self.schedule_clock, self.run_clock = PhaseClock(), PhaseClock()
        self.schedule_clock.wrap(core.scheduler, "schedule")
        self.run_clock.wrap(core.runner, "run")
        self.next_seed = 0

    def add(self, prompt: Prompt, patches: int) -> None:
        params = SamplingParams(seed=self.next_seed, min_len=patches, max_len=patches)
        self.next_seed += 1
        self.core.add_request(prompt, params)

    def step(self) -> tuple[dict[str, float], list[StepOutput]]:
        """One step; per phase its host milliseconds."""
        self.schedule_clock.take(), self.run_clock.take()
        self.model.seconds = 0.0
        wall = time.perf_counter()
        t0 = clock()
        outputs = self.core.step()
        t1 = clock()
        frames = step_frames(self.kind, outputs, self.core)
        t2 = clock()
        self.wire.send(frames)
        t3 = clock()
        wall = time.perf_counter() - wall - self.model.seconds
        # the device's step: the API side drains the socket meanwhile, as it would behind a real GPU
        time.sleep(self.device_s)
        schedule, run, model = self.schedule_clock.take(), self.run_clock.take(), self.model.seconds
        phases = {
            "schedule": schedule,
            "inputs": run - model,
            "outputs": (t1 - t0) - schedule - run,
            "serialise": t2 - t1,
            "send": t3 - t2,
            "wall": wall,
        }
        return {k: 1000 * v for k, v in phases.items()}, outputs


def summarise(name: str, wire: str, batch: int, samples: list[dict[str, float]], rows: list[int]) -> dict:
    totals = sorted(sum(s[p] for p in PHASES) for s in samples)
    row: dict[str, Any] = {"workload": name, "wire": wire, "batch": batch, "steps": len(samples)}
    row["mean_rows"] = round(statistics.mean(rows), 1)
    for phase in PHASES:  # means, so that the phases add up to the step's
        row[f"{phase}_ms"] = round(statistics.mean(s[phase] for s in samples), 3)
    row["host_ms_mean"] = round(statistics.mean(totals), 3)
    row["host_ms_p50"] = round(statistics.median(totals), 3)
    row["host_ms_p95"] = round(totals[min(len(totals) - 1, int(0.95 * len(totals)))], 3)
    row["wall_ms_p50"] = round(statistics.median(s["wall"] for s in samples), 3)
    return row


def run_steady(
    batch: int, steps: int, prompt_len: int, wire: Wire, kind: str, device_s: float, freeze: bool = False
) -> dict:
    """`batch` streams in steady decode: every step advances each by one patch, nobody arrives or ends."""
    warm = 3
    core, model = build_core(batch, prompt_len, steps + warm, freeze)
    harness = Harness(core, model, wire, kind, device_s)
    config = core.runner.model_config
    for i in range(batch):
        harness.add(make_prompt(config, i, prompt_len), patches=steps + warm + 10)
    while any(s.num_computed < s.num_prompt_tokens for s in core.scheduler.running) or core.scheduler.waiting:
        harness.step()  # the prompts' prefill, not measured here
    for _ in range(warm):
        harness.step()
    samples, rows = [], []
    for _ in range(steps):
        phases, outputs = harness.step()
        samples.append(phases)
        rows.append(len(outputs))
    return summarise("decode", kind, batch, samples, rows)


def run_mixed(
    batch: int,
    steps: int,
    prompt_len: int,
    arrivals: int,
    wire: Wire,
    kind: str,
    device_s: float,
    freeze: bool = False,
) -> dict:
    """`batch` streams, of which `arrivals` finish every step and as many new prompts arrive and are
    prefilled in the same step as everyone else's decode (the "mixed" prefill policy)."""
    length = max(2, batch // arrivals)
    core, model = build_core(batch + arrivals, prompt_len, steps + length, freeze)
    harness = Harness(core, model, wire, kind, device_s)
    config = core.runner.model_config
    prompts = 0

    def arrive(patches: int) -> None:
        nonlocal prompts
        harness.add(make_prompt(config, prompts, prompt_len), patches)
        prompts += 1

    for i in range(batch):  # staggered lengths: `arrivals` of them end every step
        arrive(length - i // arrivals + 2)
    for _ in range(length + 2):  # the start-up burst has drained into the steady turnover
        harness.step()
        for _ in range(arrivals):
            arrive(length)
    samples, rows = [], []
    for _ in range(steps):
        phases, outputs = harness.step()
        samples.append(phases)
        rows.append(len(outputs))
        for _ in range(arrivals):
            arrive(length)
    return summarise(f"mixed ({arrivals} prefills/step)", kind, batch, samples, rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", default="1,64,256,512", help="steady-decode batch sizes, comma separated")
    parser.add_argument("--mixed", type=int, default=256, help="batch of the mixed row (0: none)")
    parser.add_argument("--arrivals", type=int, default=4, help="prefills per step in the mixed row")
    parser.add_argument("--steps", type=int, default=50, help="measured steps per row")
    parser.add_argument("--prompt-len", type=int, default=128, help="prompt positions per request")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the engine's own)")
    parser.add_argument(
        "--wire", default="frame", help=f"how outputs cross: {', '.join(WIRES)}, comma separated"
    )
    parser.add_argument(
        "--device-ms", type=float, default=10.0, help="the device's step, slept between steps"
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once each engine is built, as the engine process does after loading its model",
    )
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    wires = args.wire.split(",")
    if not set(wires) <= set(WIRES):
        parser.error(f"--wire takes {', '.join(WIRES)}")
    torch.set_num_threads(args.threads)
    device_s = args.device_ms / 1000
    wire = Wire()
    runs = []
    try:
        for kind in wires:
            for batch in (int(b) for b in args.batch.split(",") if b):
                runs.append(
                    run_steady(batch, args.steps, args.prompt_len, wire, kind, device_s, args.gc_freeze)
                )
                print_row(runs[-1])
            if args.mixed:
                runs.append(
                    run_mixed(
                        args.mixed,
                        args.steps,
                        args.prompt_len,
                        args.arrivals,
                        wire,
                        kind,
                        device_s,
                        args.gc_freeze,
                    )
                )
                print_row(runs[-1])
    finally:
        wire.close()
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
        "torch": torch.__version__,
        "threads": args.threads,
        "command": " ".join(["bench/host_overhead.py", *(argv if argv is not None else sys.argv[1:])]),
        "ipc": "pyzmq PUSH/PULL over ipc://, zero-copy sends, drained by a thread",
        "shapes": "tiny LM (hidden 64, latent 4x16), 7,680-sample float32 audio per row",
        "device_ms": args.device_ms,
        "gc_freeze": args.gc_freeze,
        "runs": runs,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


def print_row(row: dict) -> None:
    phases = "  ".join(f"{p} {row[f'{p}_ms']:.3f}" for p in PHASES)
    print(
        f"{row['workload']:>24} {row['wire']:>6} b={row['batch']:<4} "
        f"host CPU ms/step mean {row['host_ms_mean']:.3f} p50 {row['host_ms_p50']:.3f} "
        f"p95 {row['host_ms_p95']:.3f} (wall p50 {row['wall_ms_p50']:.3f}) | means: {phases}",
        flush=True,
    )


if __name__ == "__main__":
    main()
