"""`polyvox say`: synthesise TEXT to a file without a server, the engine stepping in this process."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from polyvox.cli.flags import SAY_SETTINGS, add_settings_flags, settings_from_args
from polyvox.runtime.logs import setup_logging
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings


def add_say(subparsers: argparse._SubParsersAction) -> None:
    from polyvox.audio.formats import FORMATS
    from polyvox.text.emotion import EMOTIONS

    parser = subparsers.add_parser("say", help="Synthesise TEXT to a file without a server.")
    parser.add_argument("text", metavar="TEXT", help="What to say.")
    parser.add_argument("-v", "--voice", default="alloy", help="Voice name (default: alloy).")
    parser.add_argument(
        "-f",
        "--format",
        default=None,
        choices=tuple(FORMATS),
        help="Audio format (default: the output file's suffix when it names one, else wav).",
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
    parser.add_argument(
        "--emotion",
        default=None,
        choices=EMOTIONS,
        help="Delivery, for engines that design voices (the embedded voice speaks neutral only).",
    )
    parser.add_argument(
        "--pitch", type=float, default=0.0, help="Semitones, -12 to 12, tempo kept (default: 0)."
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
    emotion: str | None = None,
    pitch: float = 0.0,
) -> bytes:
    """The whole utterance as a file of `fmt`: the text step, the back end and OutputPipeline, no
    server. `lora`: the name of one of `settings.lora`'s adapters to speak with; `pitch`: semitones,
    shifted as the server does."""
    from polyvox.audio.formats import resolve
    from polyvox.audio.pipeline import OutputPipeline
    from polyvox.backends.base import SynthesisRequest
    from polyvox.backends.factory import build_backend, build_text_pipeline
    from polyvox.settings.errors import files_named_by

    resolve(fmt, sample_rate)  # a bad format or rate is refused before a model loads
    with files_named_by(settings):
        backend = build_backend(settings)
        speech = build_text_pipeline(settings, backend)  # the text step, as the server's
    try:
        await backend.start()
    except Exception as exc:
        raise StartupError(
            f"the {backend.info.name} engine failed to start: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        # Without --sample-rate the file keeps the back end's own rate (fitted to the format; pcm: 24 kHz).
        audio_format, out_rate = resolve(fmt, sample_rate, default_rate=backend.info.sample_rate)
        backend_speed, pipeline_speed = backend.info.capabilities.split_speed(speed)
        request = SynthesisRequest(
            text=text,
            voice=voice,
            speed=backend_speed,
            instructions=instructions,
            seed=seed,
            lora=lora,
            emotion=emotion,
        )
        request = await asyncio.to_thread(speech.checked, backend, request)  # as it is spoken: its pieces
        pipeline = OutputPipeline(
            backend.info.sample_rate, out_rate, audio_format, speed=pipeline_speed, whole=True, pitch=pitch
        )
        parts = [
            await asyncio.to_thread(pipeline.push, chunk) async for chunk in speech.generate(backend, request)
        ]
        parts.append(await asyncio.to_thread(pipeline.finish))
    finally:
        await backend.stop()
    return b"".join(parts)  # one complete file: its header filled in at the end


def run_say(args: argparse.Namespace) -> int:
    from polyvox.audio.errors import UnsupportedFormat
    from polyvox.backends.errors import BackendError, BackendInputError
    from polyvox.server.protocol import PITCH_LIMIT

    try:
        fmt = output_format(args.output, args.format)
    except ValueError as exc:  # before anything loads
        print(f"polyvox say: {exc}", file=sys.stderr)
        return 2
    if hasattr(args, "lora"):
        args.lora = [_named_adapter(entry) for entry in args.lora]
    # One utterance: the engine steps in this process (an engine process would only add its start-up).
    settings = settings_from_args(args).model_copy(update={"engine_process": False, "data_parallel_size": 1})
    setup_logging("warning" if settings.log_level == "info" else settings.log_level, settings.log_format)
    if not 0.25 <= args.speed <= 4.0:
        print("polyvox say: --speed must be between 0.25 and 4.0", file=sys.stderr)
        return 2
    if not -PITCH_LIMIT <= args.pitch <= PITCH_LIMIT:
        print(f"polyvox say: --pitch must be between {-PITCH_LIMIT:g} and {PITCH_LIMIT:g}", file=sys.stderr)
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
                fmt,
                args.speed,
                args.sample_rate,
                args.instructions,
                seed=args.seed,
                lora=lora,
                emotion=args.emotion,
                pitch=args.pitch,
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
        path = Path(args.output or f"speech.{fmt}")
        path.write_bytes(data)
        print(f"wrote {path} ({len(data)} bytes)", file=sys.stderr)
    return 0


def output_format(output: str | None, asked: str | None) -> str:
    """The format to write: `--format` (`asked`), else the one the output file's suffix names (`y.mp3`:
    mp3), else wav. ValueError for a suffix naming another format than `--format`."""
    from polyvox.audio.formats import FORMATS

    suffix = Path(output).suffix.lower().lstrip(".") if output and output != "-" else ""
    named = suffix if suffix in FORMATS else None
    if asked is not None and named is not None and named != asked:
        raise ValueError(
            f"-o {output} names {named}, but --format {asked} was given: "
            f"name the file .{asked}, or drop --format to write {named}"
        )
    return asked or named or "wav"


def _named_adapter(entry: str) -> str:
    """`--lora DIR` as `NAME=DIR`: named after its directory (or `lora` when that cannot be a name)."""
    if "=" in entry:
        return entry
    from polyvox.voices.store import NAME_PATTERN

    name = Path(entry).name
    return f"{name if NAME_PATTERN.fullmatch(name) else 'lora'}={entry}"
