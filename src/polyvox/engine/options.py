"""`WorkerOptions`: what an engine is built with besides the model (batching configuration, generation
defaults, PyTorch threads). Plain data, so an engine process receives it as it is; the API side makes it
without importing PyTorch (the engine's parts are imported where they are built)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from polyvox.core.config import BatchingConfig
from polyvox.engine.adapters import AdapterOptions
from polyvox.engine.limits import DEFAULT_MAX_PATCHES, REFERENCE_CACHE_SIZE

if TYPE_CHECKING:
    from polyvox.engine.prompt_cache import VoicePromptCache
    from polyvox.engine.prompts import PromptBuilder
    from polyvox.engine.worker import EngineWorker
    from polyvox.models.interface import SpeechModel


@dataclass
class WorkerOptions:
    config: BatchingConfig = field(default_factory=BatchingConfig)
    cfg_value: float = 2.0
    inference_timesteps: int = 10
    max_patches: int = DEFAULT_MAX_PATCHES
    prompt_cache_size: int = REFERENCE_CACHE_SIZE
    torch_threads: int | None = None  # PyTorch's intra-op threads (process-wide); None: its default
    adapters: AdapterOptions = field(default_factory=AdapterOptions)

    def prompt_builder(self, model: SpeechModel, cache: VoicePromptCache | None = None) -> PromptBuilder:
        from polyvox.engine.prompt_cache import VoicePromptCache
        from polyvox.engine.prompts import PromptBuilder

        return PromptBuilder(
            model,
            cfg_value=self.cfg_value,
            inference_timesteps=self.inference_timesteps,
            max_patches=self.max_patches,
            prompt_cache=cache if cache is not None else VoicePromptCache(self.prompt_cache_size),
        )

    def worker(self, prompts: PromptBuilder) -> EngineWorker:
        from polyvox.engine.worker import EngineWorker

        return EngineWorker(prompts, self.config, self.adapters)
