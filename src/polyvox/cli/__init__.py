"""The `polyvox` command: `serve` (the HTTP server), `say` (synthesise without a server), `bench` (a load
generator against a running server) and `checkpoint` (random-weight checkpoints), one module each;
flags.py makes the settings flags, command.py is the parser and `main`. `python -m polyvox.cli` runs it."""

from polyvox.cli.command import build_parser, main
from polyvox.cli.flags import settings_from_args

__all__ = ["build_parser", "main", "settings_from_args"]
