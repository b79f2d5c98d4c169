"""The `polyvox` command: `serve` (the HTTP server), `say` (synthesise without a server) and `bench`
(a load generator against a running server) and `checkpoint` (`polyvox.cli_checkpoint`). Subcommands
live in a registry, so adding one is a small, separate change."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from polyvox import __version__
from polyvox.cli_checkpoint import register as add_checkpoint
from polyvox.cli_flags import SAY_SETTINGS, Parser, add_settings_flags, settings_from_args
from polyvox.logs import setup_logging
from polyvox.settings import Settings
from polyvox.startup import StartupError

log = logging.getLogger("polyvox")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


# --- start-up failures ---------------------------------------------------------------------------


def _debug(args: argparse.Namespace) -> bool:
    """Whether a start-up failure shows its traceback: `--debug`, or a debug log level asked for."""
    level = getattr(args, "log_level", None) or os.environ.get("POLYVOX_LOG_LEVEL", "")
    return bool(getattr(args, "debug", False)) or level.lower() == "debug"


# --- serve -----------------------------------------------------------------------------------------


def add_serve(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("serve", help="Run the OpenAI-compatible HTTP server.")
    add_settings_flags(parser)
    parser.set_defaults(func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from polyvox.server.app import create_app
    from polyvox.server.connections import uvicorn_config
    from polyvox.server.lifecycle.draining import DrainingServer
    from polyvox.settings.errors import files_named_by

    settings = settings_from_args(args)
    log_config = setup_logging(settings.log_level, settings.log_format)
    if settings.api_server_count > 1:
        return _serve_many(settings)
    with files_named_by(settings):
        app = create_app(settings)
    info = app.state.backend.info
    log.info("serving %s (model %s) on http://%s:%d", info.name, info.model_id, settings.host, settings.port)
    _warn_if_open(settings, app.state.keyring.open)
    config = uvicorn_config(app, settings, log_config, host=settings.host, port=settings.port)
    server = DrainingServer.serving(app, config)
    server.run()
    if server.failure is not None:
        raise StartupError(f"the engine failed to start: {server.failure}")
    return 0


def _warn_if_open(settings: Settings, keyless: bool) -> None:
    if settings.host not in LOOPBACK_HOSTS and keyless:
        log.warning(
            "listening on %s, beyond loopback, with no API key: anyone who can reach this port can use "
            "the server (set api_keys or api_keys_file)",
            settings.host,
        )


def _serve_many(settings: Settings) -> int:
    """`api_server_count` > 1: the launcher, its engine ranks and its API server processes."""
    from polyvox.server.auth import KeyRing
    from polyvox.server.multi_api.launcher import serve_many

    _warn_if_open(settings, KeyRing.from_settings(settings).open)
    serve_many(settings)
    return 0


# --- say -------------------------------------------------------------------------------------------


def add_say(subparsers: argparse._SubParsersAction) -> None:
    from polyvox.audio.formats import FORMATS

    parser = subparsers.add_parser("say", help="Synthesise TEXT to a file without a server.")
    parser.add_argument("text", metavar="TEXT", help="What to say.")
    parser.add_argument("-v", "--voice", default="alloy", help="Voice name (default: alloy).")
    parser.add_argument(
        "-f", "--format", default="wav", choices=tuple(FORMATS), help="Audio format (default: wav)."
    )
    parser.add_argument("-o", "--output", help="Output file (default: speech.<format>; '-' writes stdout).")
    parser.add_argument("--speed", type=float, default=1.0, help="0.25 to 4.0 (default: 1.0).")
    parser.add_argument(
        "--sample-rate",
        type=int,
        default=None,
        help="Output sample rate (default: the engine's own, e.g. 48000 for VoxCPM2, fitted to the format; "
        "pcm: 24000).",
    )
    parser.add_argument(
        "--instructions", default=None, help="Style instructions, for engines that follow them."
    )
    parser.add_argument("--seed", type=int, default=None, help="Sampling noise seed (default: random).")
    # --lora (a settings flag) speaks with the adapter; say also takes a bare DIR, named after it
    add_settings_flags(parser, SAY_SETTINGS)
    parser.set_defaults(func=run_say)


async def synthesize_file(
    settings: Settings,
    text: str,
    voice: str,
    fmt: str,
    speed: float = 1.0,
    sample_rate: int | None = None,
    instructions: str | None = None,
    seed: int | None = None,
    lora: str | None = None,
) -> bytes:
    """The whole utterance as a file of `fmt`: engine and OutputPipeline, no server. `lora`: the name of
    one of `settings.lora`'s adapters to speak with."""
    from polyvox.audio.formats import resolve
    from polyvox.audio.pipeline import OutputPipeline
    from polyvox.backends.base import SynthesisRequest
    from polyvox.backends.factory import build_backend
    from polyvox.settings.errors import files_named_by

    resolve(fmt, sample_rate)  # a bad format or rate is refused before a model loads
    with files_named_by(settings):
        backend = build_backend(settings)
    try:
        await backend.start()
    except Exception as exc:
        raise StartupError(
            f"the {backend.info.name} engine failed to start: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        # Without --sample-rate the file keeps the engine's own rate (fitted to the format; pcm: 24 kHz).
        audio_format, out_rate = resolve(fmt, sample_rate, default_rate=backend.info.sample_rate)
        backend_speed, pipeline_speed = backend.info.capabilities.split_speed(speed)
        request = SynthesisRequest(
            text=text, voice=voice, speed=backend_speed, instructions=instructions, seed=seed, lora=lora
        )
        backend.validate(request)
        pipeline = OutputPipeline(
            backend.info.sample_rate, out_rate, audio_format, speed=pipeline_speed, whole=True
        )
        parts = [await asyncio.to_thread(pipeline.push, chunk) async for chunk in backend.generate(request)]
        parts.append(await asyncio.to_thread(pipeline.finish))
    finally:
        await backend.stop()
    return b"".join(parts)  # one complete file: its header filled in at the end


def run_say(args: argparse.Namespace) -> int:
    from polyvox.audio.errors import UnsupportedFormat
    from polyvox.backends.errors import BackendError, BackendInputError

    if hasattr(args, "lora"):
        args.lora = [_named_adapter(entry) for entry in args.lora]
    # One utterance: the engine steps in this process (an engine process would only add its start-up).
    settings = settings_from_args(args).model_copy(update={"engine_process": False, "data_parallel_size": 1})
    setup_logging("warning" if settings.log_level == "info" else settings.log_level, settings.log_format)
    if not 0.25 <= args.speed <= 4.0:
        print("polyvox say: --speed must be between 0.25 and 4.0", file=sys.stderr)
        return 2
    lora = args.voice if args.voice in settings.lora else None
    if lora is None and len(settings.lora) == 1:
        lora = next(iter(settings.lora))
    elif lora is None and settings.lora:
        names = ", ".join(sorted(settings.lora))
        print(f"polyvox say: several LoRA adapters ({names}): pick one with --voice NAME", file=sys.stderr)
        return 2
    try:
        data = asyncio.run(
            synthesize_file(
                settings,
                args.text,
                args.voice,
                args.format,
                args.speed,
                args.sample_rate,
                args.instructions,
                seed=args.seed,
                lora=lora,
            )
        )
    except (BackendInputError, UnsupportedFormat) as exc:
        print(f"polyvox say: {exc}", file=sys.stderr)
        return 2
    except BackendError as exc:
        print(f"polyvox say: synthesis failed: {exc}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        path = Path(args.output or f"speech.{args.format}")
        path.write_bytes(data)
        print(f"wrote {path} ({len(data)} bytes)", file=sys.stderr)
    return 0


def _named_adapter(entry: str) -> str:
    """`--lora DIR` as `NAME=DIR`: named after its directory (or `lora` when that cannot be a name)."""
    if "=" in entry:
        return entry
    from polyvox.voices.store import NAME_PATTERN

    name = Path(entry).name
    return f"{name if NAME_PATTERN.fullmatch(name) else 'lora'}={entry}"


# --- bench -----------------------------------------------------------------------------------------


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


# --- entry point -----------------------------------------------------------------------------------

SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction], object]] = {
    "serve": add_serve,
    "say": add_say,
    "bench": add_bench,
    "checkpoint": add_checkpoint,
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="polyvox", description="Self-hosted, OpenAI-compatible text-to-speech.")
    parser.add_argument("--version", action="version", version=f"polyvox {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS.values():
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StartupError as exc:
        # An expected failure (a missing checkpoint, a malformed config file...): its message says what
        # to do; the traceback only helps someone debugging polyvox itself.
        if _debug(args):
            traceback.print_exc()
        print(f"polyvox {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
