"""Chooses and builds the engine the settings ask for: VoxCPM2 with a checkpoint or random weights,
otherwise the embedded CPU voice; `build_speech_engine` puts the text front end (lexicon,
normalisation, long-text splitting) in front of it, as every serving path uses it. Engines are
imported lazily so each one's dependencies load only when it is served."""

from __future__ import annotations

from polyvox.engines.base import Engine
from polyvox.engines.piecewise import PiecewiseEngine
from polyvox.settings import Settings
from polyvox.text.frontend import TextFrontend
from polyvox.text.lexicon import Lexicon


def build_engine(settings: Settings) -> Engine:
    """The engine `settings` select (not started yet)."""
    if settings.model or settings.random_weights:
        from polyvox.engines.voxcpm2 import VoxCPM2Engine

        return VoxCPM2Engine.from_settings(settings)

    from polyvox.engines.embedded import EmbeddedEngine

    return (
        EmbeddedEngine.from_settings(settings)
        if hasattr(EmbeddedEngine, "from_settings")
        else EmbeddedEngine()
    )


def with_text_frontend(engine: Engine, settings: Settings) -> PiecewiseEngine:
    """`engine` behind the text front end `settings` describe (an already wrapped engine is kept)."""
    if isinstance(engine, PiecewiseEngine):
        return engine
    lexicon = Lexicon.load(settings.lexicon_path) if settings.lexicon_path is not None else Lexicon()
    frontend = TextFrontend(
        lexicon, normalize_default=settings.normalize, max_piece_chars=settings.max_piece_chars
    )
    return PiecewiseEngine(
        engine, frontend, lookahead=settings.piece_lookahead, crossfade_ms=settings.crossfade_ms
    )


def build_speech_engine(settings: Settings) -> PiecewiseEngine:
    """What `polyvox serve` and `polyvox say` speak with: the selected engine behind the text front end."""
    return with_text_frontend(build_engine(settings), settings)
