"""`polyvox checkpoint ...`: checkpoint utilities (random-weight checkpoints for tests and benchmarks)."""

from __future__ import annotations

import argparse
from pathlib import Path

# the releases `polyvox.models.architectures` knows (kept literal here: the CLI imports no torch to start)
ARCHS = ("voxcpm1", "voxcpm1.5", "voxcpm2")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("checkpoint", help="Checkpoint utilities.")
    actions = parser.add_subparsers(dest="checkpoint_command", metavar="ACTION", required=True)
    random = actions.add_parser(
        "random", help="Write a VoxCPM checkpoint directory with random weights (official layout)."
    )
    random.add_argument(
        "--arch",
        choices=ARCHS,
        default="voxcpm2",
        help="The release: voxcpm1 (VoxCPM-0.5B, 16 kHz), voxcpm1.5 (44.1 kHz) or voxcpm2 (48 kHz; default).",
    )
    random.add_argument("--size", choices=("tiny", "full"), default="tiny", help="tiny (CPU tests) or full.")
    random.add_argument("--out", type=Path, required=True, help="Directory to write.")
    random.add_argument("--seed", type=int, default=0, help="Random seed (default 0).")
    random.set_defaults(func=run_random)
    return parser


def run_random(args: argparse.Namespace) -> int:
    from polyvox.backends.factory import require_torch

    require_torch("a random checkpoint")
    from polyvox.models.random_checkpoint import write_random_checkpoint

    out = write_random_checkpoint(args.out, args.size, args.seed, args.arch)
    print(f"wrote a random {args.size} {args.arch} checkpoint to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="polyvox")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
