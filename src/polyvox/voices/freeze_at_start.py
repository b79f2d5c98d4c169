"""Freezing the builtin voices as a start-up stage (`freeze_voices_at_start`): every builtin voice not
frozen yet is frozen before `/ready` turns 200, so no first request for one waits for its freeze."""

from __future__ import annotations

import logging

from polyvox.backends.base import Backend
from polyvox.runtime.startup import Progress, stage
from polyvox.voices.registry import VoiceRegistry, stores_designed_voices

log = logging.getLogger(__name__)

FREEZE_STAGE = "freeze the builtin voices"


def wants_freeze_at_start(enabled: bool, backend: Backend) -> bool:
    """Whether there is anything to freeze: the setting is on and the back end designs voices."""
    return enabled and stores_designed_voices(backend.info)


async def freeze_builtin_voices(registry: VoiceRegistry, backend: Backend) -> None:
    """Freeze (or read from the voices directory) every builtin voice, counting them as they go.
    A voice that fails is logged and left to freeze on first use: the server still starts."""
    names = list(registry.builtins)
    with stage(FREEZE_STAGE):
        progress = Progress(FREEZE_STAGE, len(names), "voices")
        for name in names:
            try:
                await registry.resolve(name, backend)
            except Exception as exc:  # any back-end failure: this voice then freezes on first use
                log.warning(
                    "builtin voice %s not frozen at start (%s: %s); it will be frozen on first use",
                    name,
                    type(exc).__name__,
                    exc,
                )
            progress.advance()
