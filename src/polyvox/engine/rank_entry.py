"""The entry point an engine rank's owner gives multiprocessing (`run`): a function in a module that
imports nothing, so the owner, an API process that never loads a model, names it without importing
PyTorch. It runs `process_main.run`, which the forkserver imported once for every rank it forks
(engine/forkserver.py); a spawned rank (no forkserver) imports it here."""

from __future__ import annotations

from typing import Any


def run(*args: Any) -> None:
    """`process_main.run(*args)`, in the engine process."""
    from polyvox.engine import process_main

    process_main.run(*args)
