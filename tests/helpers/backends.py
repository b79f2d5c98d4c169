"""`BackendWrapper`: a Backend that hands everything to a real inner engine, for tests that watch or
steer the pieces it speaks by overriding `speak` (the inner engine does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polyvox.backends.base import AudioStream, Backend, PromptCacheStats, ReferenceAudio, SynthesisRequest

if TYPE_CHECKING:
    from polyvox.core.core import BatchingStats


class BackendWrapper(Backend):
    """Passes the Backend contract through to `inner`; subclasses override `speak`, which sees every
    piece a text step with a front end speaks (`build_text_pipeline`). A request that is no piece
    (`piece` None: a designed voice's freeze, spoken as written) goes straight to `inner`, as it would
    on the engine served alone."""

    def __init__(self, inner: Backend):
        self.inner = inner
        self.info = inner.info

    @property
    def ready(self) -> bool:
        return self.inner.ready

    async def until_ready(self, ready: bool = True) -> None:
        await self.inner.until_ready(ready)  # the wrapped back end's own signal, not the default's polling

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    def validate(self, request: SynthesisRequest) -> None:
        self.inner.validate(request)

    async def check_voice(self, reference: ReferenceAudio) -> None:
        await self.inner.check_voice(reference)

    def generate(self, request: SynthesisRequest) -> AudioStream:
        if request.piece is None:
            return self.inner.generate(request)
        return self.speak(request)

    def speak(self, request: SynthesisRequest) -> AudioStream:
        """One piece of a speech request (`request.piece`: its index)."""
        return self.inner.generate(request)

    def stats(self) -> BatchingStats | None:
        return self.inner.stats()

    def prompt_cache_stats(self) -> PromptCacheStats:
        return self.inner.prompt_cache_stats()
