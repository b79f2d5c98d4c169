"""`PromptBuilder`: what the engine core runs for an `EngineRequest` on a loaded model: the prompt
(tokenised text, voice design, the reference clip VAE-encoded through the voice prompt cache) and the
`SamplingParams` (defaults, length caps, the refusal of a prompt that leaves no room to speak)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from polyvox.audio.resample import resample_clip
from polyvox.core.errors import EngineInputError
from polyvox.core.sequence import SamplingParams
from polyvox.engine.limits import (
    DEFAULT_MAX_PATCHES,
    DEFAULT_MIN_PATCHES,
    REFERENCE_CACHE_SIZE,
    SHORTEST_INPUT,
)
from polyvox.engine.prompt_cache import VoicePromptCache
from polyvox.engine.request import EngineReference, EngineRequest
from polyvox.models.architectures import clones_from_clip_alone
from polyvox.models.interface import Padding, Prompt, SpeechModel


class PromptBuilder:
    """Thread-safe: prompts are built off the step loop, several at once."""

    def __init__(
        self,
        model: SpeechModel,
        *,
        cfg_value: float = 2.0,
        inference_timesteps: int = 10,
        max_patches: int = DEFAULT_MAX_PATCHES,
        prompt_cache: VoicePromptCache | None = None,
    ) -> None:
        self.model = model
        self.cfg_value = cfg_value
        self.inference_timesteps = inference_timesteps
        self.max_patches = max_patches
        if prompt_cache is None:
            prompt_cache = VoicePromptCache(REFERENCE_CACHE_SIZE)
        self.prompt_cache = prompt_cache

    # ------------------------------------------------------------------ sampling parameters

    def params(self, request: EngineRequest, prompt: Prompt, kv_positions: int) -> SamplingParams:
        """`kv_positions`: the most positions one sequence can hold in the engine's KV cache."""
        if request.max_patches is not None:
            max_len = request.max_patches
        else:
            max_len = self.model.capped_max_len(prompt, self.max_patches)
        room = self.positions(kv_positions) - len(prompt)
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
            adapter=request.lora,
        )

    def positions(self, kv_positions: int) -> int:
        """The most positions one request's prompt and speech may take: the model's and the KV cache's
        (`kv_positions`) limits."""
        config = self.model.config
        return min(kv_positions, config.max_length, config.lm_config.max_position_embeddings)

    def _too_long(self, request: EngineRequest, prompt: Prompt, positions: int) -> EngineInputError:
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
        return EngineInputError(
            f"the prompt takes {len(prompt)} positions and this model can use {positions}, leaving no room "
            f"to speak; its longest part is {param} ({parts[param]} positions): shorten it",
            param=param,
        )

    # ------------------------------------------------------------------ prompts

    def prompt(self, request: EngineRequest) -> Prompt:
        return self._layout(request, self._encode)

    def voice_positions(self, transcript: str | None, seconds: float) -> int:
        """The positions the prompt of the shortest input takes with a voice whose clip is `seconds`
        long and whose transcript is `transcript`: laid out as `prompt` lays it out, the clip's latent
        patches counted rather than encoded (an upload's check costs no VAE work in the step loop)."""
        config = self.model.config
        samples = round(seconds * self.model.reference_rate)
        patches = max(1, math.ceil(samples / (config.patch_size * self.model.vae.chunk_size)))
        latents = torch.zeros(patches, config.patch_size, config.feat_dim)
        clip = EngineReference(np.zeros(0, np.float32), self.model.reference_rate, "", transcript or None)
        request = EngineRequest(text=SHORTEST_INPUT, reference=clip)
        return len(self._layout(request, lambda _clip, _padding: latents))

    def _layout(
        self, request: EngineRequest, encode: Callable[[EngineReference, Padding], torch.Tensor]
    ) -> Prompt:
        """The request's prompt, its clip's latent patches from `encode`."""
        ref = request.reference
        if ref is None:
            return self.model.build_prompt(request.text, instructions=request.instructions)
        # VoxCPM 1.x has no reference prompt: a transcribed clip is continued (its back end refuses
        # a clip without a transcript)
        reference = encode(ref, "right") if clones_from_clip_alone(self.model.arch) else None
        if not ref.transcript:
            return self.model.build_prompt(
                request.text, instructions=request.instructions, reference=reference
            )
        return self.model.build_prompt(
            request.text,
            instructions=request.instructions,
            reference=reference,
            prompt_text=ref.transcript,
            prompt_audio=encode(ref, "left"),
        )

    def _encode(self, ref: EngineReference, padding: Padding) -> torch.Tensor:
        """The clip's latent patches, from the prompt cache or encoded now."""

        def encode() -> torch.Tensor:
            samples = resample_clip(ref.samples, ref.sample_rate, self.model.reference_rate)
            return self.model.encode_clip(samples, padding)

        return self.prompt_cache.get_or_encode((ref.content_hash, padding), encode)
