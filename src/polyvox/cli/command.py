"""The `polyvox` command's parser and entry point. Subcommands live in a registry (`SUBCOMMANDS`), one
module each (serve.py, say.py, bench.py, checkpoint.py), so adding one is a small, separate change; an
expected start-up failure (`StartupError`) is one line, its traceback shown only when debugging."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable

from polyvox import __version__
from polyvox.cli.bench import add_bench
from polyvox.cli.checkpoint import register as add_checkpoint
from polyvox.cli.flags import Parser
from polyvox.cli.keys import register as add_keys
from polyvox.cli.say import add_say
from polyvox.cli.serve import add_serve
from polyvox.runtime.startup import StartupError


def _debug(args: argparse.Namespace) -> bool:
    """Whether a start-up failure shows its traceback: `--debug`, or a debug log level asked for."""
    level = getattr(args, "log_level", None) or os.environ.get("POLYVOX_LOG_LEVEL", "")
    return bool(getattr(args, "debug", False)) or level.lower() == "debug"


SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction], object]] = {
    "serve": add_serve,
    "say": add_say,
    "bench": add_bench,
    "checkpoint": add_checkpoint,
    "keys": add_keys,
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
