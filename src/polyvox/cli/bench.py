"""`polyvox bench`: load-test a running server's /v1/audio/speech (the load generator is
`polyvox.bench.loadgen`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    from polyvox.audio.formats import FORMATS

    parser = subparsers.add_parser(
        "bench",
        help="Load-test a running server's /v1/audio/speech.",
        description="Load-test a running server's /v1/audio/speech. Figures, per request, from sending it: "
        "first audio (ttfa) is the first body bytes, latency the last, RTF is latency / audio seconds "
        "(below 1: the answer arrived faster than it plays); throughput is audio seconds per wall "
        "second; streaming viability is the share of streams a listener starting at the first bytes "
        "could have played without a gap.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="Server base URL.")
    parser.add_argument("--concurrency", type=int, default=8, help="Requests in flight at once (default: 8).")
    parser.add_argument("--requests", type=int, default=32, help="Requests in all (default: 32).")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--stream",
        action="store_const",
        const="stream",
        dest="mode",
        help="Ask for a stream explicitly (stream_format=audio).",
    )
    mode.add_argument(
        "--whole",
        action="store_const",
        const="whole",
        dest="mode",
        help="Ask for one whole file (stream=false): first audio is then the latency, and no viability.",
    )
    parser.set_defaults(mode="default")  # neither: the request as an OpenAI client sends it (streamed)
    parser.add_argument(
        "--format", default="pcm", choices=tuple(FORMATS), help="response_format (default: pcm)."
    )
    parser.add_argument("--input", default=None, help="Text of every request (default: a ~10 s paragraph).")
    parser.add_argument("--voice", default="alloy", help="Voice (default: alloy).")
    parser.add_argument("--model", default="tts-1", help="Model field of each request (default: tts-1).")
    parser.add_argument("--timeout", type=float, default=600.0, help="Per-request timeout, seconds.")
    parser.add_argument(
        "--cache",
        action="store_true",
        help="Let the server answer from its audio cache (default: bypass it).",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="One sampling seed for every request: the same audio each time, so runs compare like for like.",
    )
    parser.add_argument("--json", action="store_true", help="Print exactly one JSON object.")
    parser.set_defaults(func=run_bench)


def run_bench(args: argparse.Namespace) -> int:
    from polyvox.bench.loadgen import DEFAULT_INPUT, BenchConfig, format_report, run_load

    if args.concurrency < 1 or args.requests < 1:
        print("polyvox bench: --concurrency and --requests must be at least 1", file=sys.stderr)
        return 2
    config = BenchConfig(
        url=args.url,
        concurrency=args.concurrency,
        requests=args.requests,
        mode=args.mode,
        response_format=args.format,
        input=args.input or DEFAULT_INPUT,
        voice=args.voice,
        model=args.model,
        timeout_s=args.timeout,
        use_cache=args.cache,
        seed=args.seed,
    )
    report = asyncio.run(run_load(config))
    print(json.dumps(report) if args.json else format_report(report))
    return 0 if report["errors"] == 0 else 1
