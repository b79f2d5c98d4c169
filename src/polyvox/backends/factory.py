"""Chooses and builds what the settings ask for: the model back end (`build_backend`: VoxCPM2 with a
checkpoint or random weights, otherwise the embedded CPU voice) and the text step every serving path
puts before it (`build_text_pipeline`: the lexicon, normalisation, long-text splitting, lookahead,
crossfades and the word aligner), kept apart: the text step builds a request's plan and speaks it on
the back end; it does not wrap it. Back ends are imported lazily so each one's dependencies load only
when it is served: the embedded voice's server imports no PyTorch, which only VoxCPM needs (the
`voxcpm` extra)."""

from __future__ import annotations

import importlib.util

from polyvox.alignment.aligners import make_aligner
from polyvox.backends.base import Backend
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings
from polyvox.settings.errors import InvalidSettings
from polyvox.text.frontend import TextFrontend
from polyvox.text.lexicon import Lexicon, LexiconError


def build_backend(settings: Settings, engine_sockets: str | None = None) -> Backend:
    """What `polyvox serve` and `polyvox say` speak on: the model back end `settings` select (not
    started yet; its text step: `build_text_pipeline`); `engine_sockets`: VoxCPM's engine ranks
    are the launcher's, listening there (an API process behind `api_server_count`). StartupError for
    adapters (`lora`) given to a back end that serves none: they would be ignored without a word."""
    if settings.model or settings.random_weights:
        require_torch("--model" if settings.model else "--random-weights")
        from polyvox.backends.voxcpm import VoxCPMBackend

        return VoxCPMBackend.from_settings(settings, engine_sockets, connect=engine_sockets is not None)

    from polyvox.backends.embedded import EmbeddedBackend

    if settings.lora:
        names = ", ".join(sorted(settings.lora))
        raise StartupError(
            f"--lora {names}: the embedded voice serves no LoRA adapters; serve VoxCPM2 "
            "(--model CHECKPOINT) to speak with them"
        )
    return EmbeddedBackend.from_settings(settings)


def require_torch(what: str) -> None:
    """StartupError in one line naming the extra to install when PyTorch, which `what` (a flag that
    selects VoxCPM) needs, is not installed. Found, not imported: an API process whose engine runs in
    processes of its own on the CPU never imports it (a second of CPU and ~180 MiB it would not use)."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise StartupError(
            f"{what} needs PyTorch (for VoxCPM), and torch is not installed: "
            "pip install 'polyvox[voxcpm]' (make install-voxcpm; the CPU or CUDA build: docs/deployment.md)"
        )


def build_text_pipeline(settings: Settings, backend: Backend) -> TextPipeline:
    """The text step `settings` describe, for speaking on `backend` (which decides only whether an
    aligner is built)."""
    frontend = TextFrontend(
        _lexicon(settings), normalize_default=settings.normalize, max_piece_chars=settings.max_piece_chars
    )
    # Word timestamps: a back end that times its words itself needs no aligner (none is built); a CTC
    # model runs on the `device` setting (auto: CUDA when there is one).
    timed_itself = backend.info.capabilities.word_timings
    aligner = None if timed_itself else make_aligner(settings.aligner, device=settings.device)
    return TextPipeline(
        frontend,
        lookahead=settings.piece_lookahead,
        crossfade_ms=settings.crossfade_ms,
        aligner=aligner,
    )


def _lexicon(settings: Settings) -> Lexicon:
    """The lexicon `lexicon_path` names (an empty one without it). A file that cannot be used is a
    setting to fix, said as one (InvalidSettings), like any other file a setting names."""
    if settings.lexicon_path is None:
        return Lexicon()
    try:
        return Lexicon.load(settings.lexicon_path)
    except LexiconError as exc:
        raise InvalidSettings(f"lexicon_path: {exc}; fix the file, or unset lexicon_path") from exc
