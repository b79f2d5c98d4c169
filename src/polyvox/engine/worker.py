"""`EngineWorker`: the engine side of serving a model of any family, a loaded model with its `EngineCore`
and the `PromptBuilder` that turns an `EngineRequest` into what the core runs. The in-thread engine
and the engine process both use it, so they make the same audio."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams
from polyvox.engine.adapters import AdapterOptions, EngineAdapters
from polyvox.engine.prompts import PromptBuilder
from polyvox.engine.request import EngineRequest
from polyvox.models.interface import Prompt
from polyvox.runtime.startup import stage

log = logging.getLogger(__name__)


class EngineWorker:
    """`prepare` is thread-safe (it runs off the step loop); the core is driven by one thread."""

    def __init__(
        self, prompts: PromptBuilder, config: BatchingConfig, adapters: AdapterOptions | None = None
    ) -> None:
        model = prompts.model
        self.prompts = prompts
        self.config = config
        self.adapters = EngineAdapters(model, adapters or AdapterOptions(), compiled=config.compile)
        with stage("build the engine core (KV cache, attention, compile)"):
            self.core = EngineCore(model.lm, model.vae, model.config, config, model.device, model.dtype)
        log.info(
            "%s engine: %d KV blocks of %d positions on %s",
            model.arch,  # the release served (voxcpm1, voxcpm1.5, voxcpm2): the core is the same
            self.core.block_manager.num_blocks,
            config.kv_block_size,
            model.device,
        )

    def control(self, method: str, args: dict[str, Any]) -> Any:
        """A control call from the API server (sent to every rank): `describe` answers what this engine
        holds. KeyError for a method it does not know."""
        calls: dict[str, Callable[..., Any]] = {
            "describe": self.describe,
            "load_adapter": self.adapters.load,
            "unload_adapter": self.adapters.unload,
            "voice_room": self.voice_room,
        }
        if method not in calls:
            raise KeyError(f"unknown control call {method!r}")
        return calls[method](**args)

    def describe(self) -> dict[str, Any]:
        model = self.prompts.model
        return {
            "device": str(model.device),
            "dtype": str(model.dtype).removeprefix("torch."),
            "num_kv_blocks": self.core.block_manager.num_blocks,
            "kv_block_size": self.config.kv_block_size,
        }

    def voice_room(self, transcript: str | None, seconds: float) -> dict[str, int]:
        """What a voice (a clip `seconds` long, its `transcript`) takes of a prompt here: the positions
        of the shortest input's prompt with it (`positions`), its transcript's share (`transcript`),
        and the most a request may take (`limit`): a voice that leaves no room to speak is refused as
        it is stored, not on every request."""
        tokens = self.prompts.model.tokenizer
        return {
            "positions": self.prompts.voice_positions(transcript, seconds),
            "transcript": len(tokens(transcript)) if transcript else 0,
            "limit": self.prompts.positions(self.kv_positions),
        }

    @property
    def kv_positions(self) -> int:
        return self.core.block_manager.num_blocks * self.config.kv_block_size

    def prepare(self, request: EngineRequest) -> tuple[Prompt, SamplingParams]:
        """The prompt and sampling parameters of a validated request; EngineInputError when its prompt
        leaves no room to speak."""
        prompt = self.prompts.prompt(request)
        return prompt, self.prompts.params(request, prompt, self.kv_positions)
