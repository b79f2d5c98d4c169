"""The engine alone, in this process: the requests `polyvox bench --stream` sends a server (the same
JSON body, made into a `SynthesisRequest` by the server's own `SpeechService`: control characters,
the voice resolved and frozen, instructions, seed) handed straight to the back end `polyvox serve
--no-engine-process` builds from the same flags (the text front end, `VoxCPM2Backend`, the engine
stepping in a thread), with no HTTP, no encoding and no client process. `requests` requests,
`concurrency` at a time, each one's chunks timed from the moment it was handed over; the report has
`polyvox bench`'s fields (`bench/loadgen.py` `summarize`), so `bench/served_compare.py` sets it beside
the served rows and divides: the share of the engine's throughput that reaches clients.

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

from polyvox.backends.factory import build_backend
from polyvox.bench.loadgen import DEFAULT_INPUT, BenchConfig, Sample, summarize
from polyvox.cli.flags import add_settings_flags, settings_from_args
from polyvox.logs import setup_logging
from polyvox.server.metrics import Metrics
from polyvox.server.protocol import SpeechRequest
from polyvox.server.speech.synthesis import SpeechService
from polyvox.voices.registry import VoiceRegistry

WARM_UP = "One sentence to warm the server up."  # what bench/served_compare.py warms a server with


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def body_of(text: str, voice: str, seed: int | None) -> SpeechRequest:
    """The body `polyvox bench --stream` posts (`loadgen._one`), pcm as served_compare asks."""
    payload = {"model": "tts-1", "input": text, "voice": voice, "response_format": "pcm"}
    payload["stream_format"] = "audio"
    if seed is not None:
        payload["seed"] = seed
    return SpeechRequest.model_validate(payload)


async def one(service: SpeechService, body: SpeechRequest) -> Sample:
    """One request as the server's route shapes it, its chunks straight from the back end."""
    sample = Sample(status=200)
    rate = service.backend.info.sample_rate
    sent = time.perf_counter()
    voice = await service.resolve_voice(body.voice)
    job = service.prepare(body, stream=True, no_cache=True, voice=voice)
    chunks = service.backend.generate(job.request)
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
    sample.audio_s = samples / rate
    if sample.error is None and not samples:
        sample.error = "no audio"
    return sample


async def run_row(service: SpeechService, body: SpeechRequest, concurrency: int, requests: int) -> dict:
    """`requests` requests, `concurrency` in flight (each that ends replaced at once), as polyvox bench
    sends them."""
    remaining = iter(range(requests))
    samples: list[Sample] = []

    async def worker() -> None:
        for _ in remaining:
            samples.append(await one(service, body))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, requests))))
    wall_s = time.perf_counter() - started
    config = BenchConfig(
        url="in-process", concurrency=concurrency, requests=requests, mode="stream", input=body.input
    )
    return summarize(samples, wall_s, config)


async def measure(args: argparse.Namespace) -> list[dict]:
    # As `polyvox say` does: the engine steps in this process, one rank.
    settings = settings_from_args(args).model_copy(update={"engine_process": False, "data_parallel_size": 1})
    backend = build_backend(settings)
    await backend.start()
    try:
        service = SpeechService(backend, settings, Metrics())
        service.voice_registry = VoiceRegistry.from_settings(settings, backend.info)
        # as served_compare warms a server: the voice frozen, one request through
        await one(service, body_of(WARM_UP, args.voice, None))
        body = body_of(args.input, args.voice, args.seed)
        rows = []
        for concurrency, requests in zip(args.concurrency, args.requests, strict=True):
            load_before = load_average()
            row = await run_row(service, body, concurrency, requests)
            row = {"load_avg_before": load_before, "load_avg_after": load_average(), **row}
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
