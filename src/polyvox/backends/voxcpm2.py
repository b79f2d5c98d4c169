"""`VoxCPM2Backend`: VoxCPM2 behind the Backend contract, served by the continuous-batching engine.

It turns a `SynthesisRequest` into a prompt (zero-shot, voice design from `instructions`, reference
cloning, reference + transcript combined), hands it to the batching engine and streams 160 ms chunks
of 48 kHz audio. Tokenising and VAE-encoding a reference run off the event loop; encoded references
are kept by content hash, so a voice used again is not encoded again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import numpy as np
import torch

from polyvox.audio.resample import resample_clip
from polyvox.backends.base import (
    OPENAI_VOICES,
    Backend,
    BackendCapabilities,
    BackendInfo,
    PromptCacheStats,
    ReferenceAudio,
    SynthesisRequest,
)
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.batching.async_core import AsyncBatchingCore, BatchingCoreDead
from polyvox.batching.config import BatchingConfig
from polyvox.batching.core import BatchingCore, BatchingStats
from polyvox.batching.sequence import SamplingParams
from polyvox.guidance import CFG_VALUE_MAX, CFG_VALUE_MIN, cfg_value_in_range
from polyvox.models.voxcpm2.generate import capped_max_len
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.models.voxcpm2.model_source import ModelSource, checkpoint_source, random_source
from polyvox.models.voxcpm2.prompt import Prompt
from polyvox.settings import Settings
from polyvox.startup import stage

if TYPE_CHECKING:
    from polyvox.models.voxcpm2.audio_in import Padding

log = logging.getLogger(__name__)

DEFAULT_MAX_PATCHES = 2000
DEFAULT_MIN_PATCHES = 2
MAX_REFERENCE_SECONDS = 60.0
REFERENCE_CACHE_SIZE = 64


class VoxCPM2Backend(Backend):
    def __init__(
        self,
        model: VoxCPM2 | ModelSource,
        config: BatchingConfig | None = None,
        *,
        model_id: str = "voxcpm2",
        cfg_value: float = 2.0,
        inference_timesteps: int = 10,
        max_patches: int = DEFAULT_MAX_PATCHES,
        prompt_cache_size: int = REFERENCE_CACHE_SIZE,
        torch_threads: int | None = None,
    ):
        # A ModelSource loads at start(), in the background, so the server answers while it loads.
        self._source = model if isinstance(model, ModelSource) else None
        if isinstance(model, VoxCPM2):
            self.model = model
        # PyTorch's intra-op threads (process-wide, set at start); None leaves PyTorch's default. On a
        # CPU, as many threads as cores fight the server's encoding threads for them (BENCHMARKS.md).
        self.torch_threads = torch_threads
        self.config = config or BatchingConfig()
        self.cfg_value = cfg_value
        self.inference_timesteps = inference_timesteps
        self.max_patches = max_patches
        self.info = BackendInfo(
            name="voxcpm2",
            model_id=model_id,
            sample_rate=model.sample_rate,
            capabilities=BackendCapabilities(cloning=True, voice_design=True),
            reference_rate=model.reference_rate,
            voices=OPENAI_VOICES,
            languages=("en", "zh"),
            extra={"device": str(model.device), "dtype": str(model.dtype).removeprefix("torch.")},
        )
        self._step_loop: AsyncBatchingCore | None = None
        self._references: OrderedDict[tuple[str, str], torch.Tensor] = OrderedDict()
        self._references_lock = threading.Lock()
        self._encoding: dict[tuple[str, str], threading.Lock] = {}
        self.prompt_cache_size = prompt_cache_size
        self.prompt_encodes = 0  # reference clips VAE-encoded (prompt cache misses)
        self.prompt_cache_hits = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> VoxCPM2Backend:
        if settings.model:
            model = checkpoint_source(settings.model, device=settings.device, dtype=settings.dtype)
            model_id = "voxcpm2"
        else:
            size = settings.random_weights or "tiny"
            model = random_source(size, device=settings.device, dtype=settings.dtype)
            model_id = f"voxcpm2-random-{settings.random_weights}"
        config = BatchingConfig(
            max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            kv_block_size=settings.kv_block_size,
            num_kv_blocks=settings.num_kv_blocks,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            prefill_policy=settings.prefill_policy,
            cuda_graphs=settings.cuda_graphs,
            attention_backend=settings.attention_backend,
            compile=settings.torch_compile,
        )
        threads = settings.torch_threads
        if threads is None and model.device.type == "cpu":
            threads = max(1, (os.cpu_count() or 1) // 2)
        return cls(
            model,
            config,
            model_id=model_id,
            cfg_value=settings.cfg_value,
            inference_timesteps=settings.inference_timesteps,
            prompt_cache_size=settings.voice_prompt_cache_size,
            torch_threads=threads,
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._step_loop is None:
            step_loop = await asyncio.to_thread(self._build)
            step_loop.start()
            self._step_loop = step_loop

    def _build(self) -> AsyncBatchingCore:
        if self.torch_threads is not None:
            torch.set_num_threads(self.torch_threads)
        if self._source is not None:
            self.model = self._source.load()
            self._source = None
        m = self.model
        with stage("build the batching core (KV cache, attention, compile)"):
            core = BatchingCore(m.lm, m.vae, m.config, self.config, m.device, m.dtype)
        log.info(
            "VoxCPM2 engine: %d KV blocks of %d positions on %s",
            core.block_manager.num_blocks,
            self.config.kv_block_size,
            m.device,
        )
        return AsyncBatchingCore(core)

    async def stop(self) -> None:
        step_loop, self._step_loop = self._step_loop, None
        if step_loop is not None:
            await asyncio.to_thread(step_loop.stop)

    @property
    def ready(self) -> bool:
        return self._step_loop is not None and self._step_loop.running

    def stats(self) -> BatchingStats | None:
        """The batching engine's counters (running, waiting, KV blocks, prefix hits, step time...)."""
        return self._step_loop.stats() if self._step_loop is not None else None

    def prompt_cache_stats(self) -> PromptCacheStats:
        return PromptCacheStats(encodes=self.prompt_encodes, hits=self.prompt_cache_hits)

    # ------------------------------------------------------------------ requests

    def validate(self, request: SynthesisRequest) -> None:
        if not request.text or not request.text.strip():
            raise BackendInputError("input text is empty", param="input", code="empty_input")
        if request.cfg_value is not None and not cfg_value_in_range(request.cfg_value):
            raise BackendInputError(
                f"cfg_value must be {CFG_VALUE_MIN:g} to {CFG_VALUE_MAX:g}", param="cfg_value"
            )
        if request.inference_timesteps is not None and not 1 <= request.inference_timesteps <= 100:
            raise BackendInputError("inference_timesteps must be 1 to 100", param="inference_timesteps")
        if not 0 < request.temperature <= 10:
            raise BackendInputError("temperature must be in (0, 10]", param="temperature")
        if request.max_patches is not None and request.max_patches < 1:
            raise BackendInputError("max_patches must be at least 1", param="max_patches")
        ref = request.reference
        if ref is not None:
            if ref.samples.size == 0 or ref.sample_rate <= 0:
                raise BackendInputError("the reference audio is empty", param="reference")
            if ref.samples.size / ref.sample_rate > MAX_REFERENCE_SECONDS:
                raise BackendInputError(
                    f"the reference audio is longer than {MAX_REFERENCE_SECONDS:.0f} s", param="reference"
                )

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        self.validate(request)
        if self._step_loop is None:
            raise BackendError("the VoxCPM2 engine is not started")
        prompt = await asyncio.to_thread(self._prompt, request)
        params = self._params(request, prompt)
        outputs = self._step_loop.generate(prompt, params, request.request_id)
        try:
            async for out in outputs:
                yield out.audio
        except BatchingCoreDead as exc:
            raise BackendError(str(exc)) from exc
        finally:
            await outputs.aclose()

    def _params(self, request: SynthesisRequest, prompt: Prompt) -> SamplingParams:
        if request.max_patches is not None:
            max_len = request.max_patches
        else:
            max_len = capped_max_len(prompt, self.max_patches)
        assert self._step_loop is not None  # generate() refuses before start()
        room = self._step_loop.core.block_manager.num_blocks * self.config.kv_block_size
        limit = min(self.model.config.max_length, self.model.config.lm_config.max_position_embeddings)
        room = min(room, limit) - len(prompt)
        if room < 1:
            raise self._too_long(request, prompt, room + len(prompt))
        max_len = min(max_len, room)
        min_len = min(
            request.min_patches if request.min_patches is not None else DEFAULT_MIN_PATCHES, max_len
        )
        return SamplingParams(
            cfg_value=request.cfg_value if request.cfg_value is not None else self.cfg_value,
            inference_timesteps=request.inference_timesteps or self.inference_timesteps,
            temperature=request.temperature,
            seed=request.seed,
            min_len=min_len,
            max_len=max_len,
        )

    def _too_long(self, request: SynthesisRequest, prompt: Prompt, positions: int) -> BackendInputError:
        """The refusal of a prompt with no room left to speak, naming its longest part: `input`,
        `instructions`, the reference's transcript (`ref_text`) or the reference audio (`reference`)."""
        tokens = self.model.tokenizer
        description = (request.instructions or "").strip()  # as design_text puts it before the text
        design = len(tokens(f"({description})")) if description else 0
        ref = request.reference
        parts = {
            "input": prompt.target_text_len - design,
            "instructions": design,
            "ref_text": len(tokens(ref.transcript)) if ref is not None and ref.transcript else 0,
            "reference": int(prompt.audio_mask.sum()),
        }
        param = max(parts, key=parts.__getitem__)
        return BackendInputError(
            f"the prompt takes {len(prompt)} positions and this model can use {positions}, leaving no room "
            f"to speak; its longest part is {param} ({parts[param]} positions): shorten it",
            param=param,
        )

    def _prompt(self, request: SynthesisRequest) -> Prompt:
        ref = request.reference
        if ref is None:
            return self.model.build_prompt(request.text, instructions=request.instructions)
        reference = self._encode(ref, "right")
        if not ref.transcript:
            return self.model.build_prompt(
                request.text, instructions=request.instructions, reference=reference
            )
        return self.model.build_prompt(
            request.text,
            instructions=request.instructions,
            reference=reference,
            prompt_text=ref.transcript,
            prompt_audio=self._encode(ref, "left"),
        )

    def _encode(self, ref: ReferenceAudio, padding: Padding) -> torch.Tensor:
        """The clip's latent patches, from the prompt cache (by content hash) or encoded now; requests
        that bring the same new clip at once wait for one encode."""
        key = (ref.content_hash, padding)
        cached = self._cached_prompt(key)
        if cached is not None:
            return cached
        with self._references_lock:
            encoding = self._encoding.setdefault(key, threading.Lock())
        with encoding:
            cached = self._cached_prompt(key)
            if cached is not None:
                return cached
            from polyvox.models.voxcpm2.audio_in import encode_wav

            samples = resample_clip(ref.samples, ref.sample_rate, self.model.vae.sample_rate)
            feats = encode_wav(self.model.vae, samples, self.model.config.patch_size, padding)
            with self._references_lock:
                self.prompt_encodes += 1
                self._references[key] = feats
                while len(self._references) > self.prompt_cache_size:
                    self._references.popitem(last=False)
                self._encoding.pop(key, None)
        return feats

    def _cached_prompt(self, key: tuple[str, str]) -> torch.Tensor | None:
        with self._references_lock:
            feats = self._references.get(key)
            if feats is not None:
                self._references.move_to_end(key)
                self.prompt_cache_hits += 1
            return feats
