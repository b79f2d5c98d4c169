"""Chooses and builds the engine the settings ask for: VoxCPM2 with a checkpoint or random weights,
otherwise the embedded CPU voice. Engines are imported lazily so each one's dependencies load only
when it is served."""

from __future__ import annotations

from polyvox.engines.base import Engine
from polyvox.settings import Settings


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
