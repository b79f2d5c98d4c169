"""The engine alone, in this process: the requests `polyvox bench --stream` sends a server, handed straight to
the text step and back end `polyvox serve --no-engine-process` builds from the same flags (the text front
end's `TextPipeline` speaking on `VoxCPMBackend`, the engine stepping in a thread), with no HTTP, no encoding
and no client process. A request is what the server hands its text step for polyvox bench's body (input,
voice, seed: nothing else is set): the text, the voice as the server's `VoiceRegistry` resolves it (a builtin
voice frozen into its clip, in the same voices directory), the seed. `requests` requests, `concurrency` at a
time, each one's chunks timed from the moment it was handed over; the report has `polyvox bench`'s fields
(`bench/loadgen.py` `summarize`), so `bench/served_compare.py` sets it beside the served rows and divides: the
share of the engine's throughput that reaches clients. Each row also carries the engine's counters before and
after it (`engine_before`, `engine_after`: steps, patches, seconds stepping, prompt blocks looked up), as
served_compare reads a server's from `/metrics`.

    python bench/engine_alone.py --concurrency 1,16 --requests 8,48 --seed 7 \\
        --random-weights tiny --device cpu --no-cache-enabled --voices-dir /tmp/voices
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

from polyvox.backends.base import Backend, SynthesisRequest
from polyvox.backends.factory import build_backend, build_text_pipeline
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.bench.loadgen import DEFAULT_INPUT, BenchConfig, Sample, summarize
from polyvox.cli.flags import add_settings_flags, settings_from_args
from polyvox.runtime.logs import setup_logging
from polyvox.voices.registry import ResolvedVoice, VoiceRegistry

WARM_UP = "One sentence to warm the server up."  # what bench/served_compare.py warms a server with


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def synthesis_request(text: str, voice: ResolvedVoice, seed: int | None) -> SynthesisRequest:
    """What the server hands its text step for a body of `text`, `voice` and `seed` alone: the voice's
    clip and the settings it brings (a builtin voice brings none), a fresh request id."""
    return SynthesisRequest(
        text=text,
        voice=voice.name,
        seed=seed,
        reference=voice.reference,
        cfg_value=voice.cfg_value,
        inference_timesteps=voice.inference_timesteps,
        request_id=uuid.uuid4().hex,
    )


async def one(speech: TextPipeline, backend: Backend, request: SynthesisRequest) -> Sample:
    """One request's chunks straight from the text step on the back end, timed from the hand-over."""
    sample = Sample(status=200)
    sent = time.perf_counter()
    chunks = speech.generate(backend, request)
    samples = 0
    try:
        async for chunk in chunks:
            sample.arrivals.append(time.perf_counter() - sent)
            sample.sizes.append(chunk.size)
            samples += chunk.size
    except Exception as exc:
        sample.error = f"{type(exc).__name__}: {exc}"
    finally:
        await chunks.aclose()
    sample.audio_s = samples / backend.info.sample_rate
    if sample.error is None and not samples:
        sample.error = "no audio"
    return sample


def engine_counters(backend: Backend) -> dict[str, float]:
    """Steps, patches and seconds spent stepping since the engine started."""
    stats = backend.stats()
    assert stats is not None  # the VoxCPM2 back end batches
    return {
        "steps": stats.steps,
        "patches": stats.patches,
        "step_s": stats.mean_step_s * stats.steps,
        "prompt_blocks": stats.prefix_cache_queries,
    }


async def run_row(
    speech: TextPipeline,
    backend: Backend,
    voice: ResolvedVoice,
    args: argparse.Namespace,
    concurrency: int,
    requests: int,
) -> dict:
    """`requests` requests, `concurrency` in flight (each that ends replaced at once), as polyvox bench
    sends them."""
    remaining = iter(range(requests))
    samples: list[Sample] = []

    async def worker() -> None:
        for _ in remaining:
            samples.append(await one(speech, backend, synthesis_request(args.input, voice, args.seed)))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, requests))))
    wall_s = time.perf_counter() - started
    config = BenchConfig(
        url="in-process", concurrency=concurrency, requests=requests, mode="stream", input=args.input
    )
    return summarize(samples, wall_s, config)


async def measure(args: argparse.Namespace) -> list[dict]:
    # As `polyvox say` does: the engine steps in this process, one rank.
    settings = settings_from_args(args).model_copy(update={"engine_process": False, "data_parallel_size": 1})
    backend = build_backend(settings)
    speech = build_text_pipeline(settings, backend)
    await backend.start()
    try:
        # as served_compare warms a server: the voice frozen (or read, frozen by a server before), one
        # request through
        voice = await VoiceRegistry.from_settings(settings, backend.info).resolve(args.voice, backend)
        await one(speech, backend, synthesis_request(WARM_UP, voice, None))
        rows = []
        for concurrency, requests in zip(args.concurrency, args.requests, strict=True):
            load_before, engine_before = load_average(), engine_counters(backend)
            row = await run_row(speech, backend, voice, args, concurrency, requests)
            row = {
                "load_avg_before": load_before,
                "load_avg_after": load_average(),
                **row,
                "engine_before": engine_before,
                "engine_after": engine_counters(backend),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        return rows
    finally:
        await backend.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(c) for c in text.split(",")],
        required=True,
        help="Requests in flight, comma-separated, one row each.",
    )
    parser.add_argument(
        "--requests",
        type=lambda text: [int(c) for c in text.split(",")],
        required=True,
        help="Requests in all, comma-separated, one per concurrency.",
    )
    parser.add_argument(
        "--input", default=DEFAULT_INPUT, help="Text of every request (default: polyvox bench's)."
    )
    parser.add_argument("--voice", default="alloy", help="Voice of every request (default: alloy).")
    parser.add_argument("--seed", type=int, default=None, help="Sampling seed of every request.")
    add_settings_flags(parser)  # the flags `polyvox serve` takes, for the same back end
    args = parser.parse_args()
    if len(args.concurrency) != len(args.requests):
        parser.error("--requests needs one count per --concurrency")
    setup_logging("warning", "text")
    print(json.dumps(asyncio.run(measure(args))))


if __name__ == "__main__":
    main()
