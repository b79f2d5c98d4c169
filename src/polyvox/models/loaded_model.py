"""`LoadedModel`: any family's loaded model as one object (config, tokenizer, LM, AudioVAE), with
reference-audio encoding and a simple batch-1 `synthesize`; the serving engine drives the same parts
batched. A family's own class (voxcpm2/loaded_model.py `VoxCPM2`, voxcpm1/loaded_model.py `VoxCPM1`)
names its parts (config, LM and AudioVAE classes) and builds its prompts; the rest is shared here."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

import numpy as np
import torch
from pydantic import ValidationError

from polyvox.models.audio_in import Padding, encode_audio_bytes, encode_wav
from polyvox.models.checkpoint import (
    REFETCH_HINT,
    VAE_FILES,
    VAE_PREFIX,
    CheckpointError,
    compare_keys,
    load_weights,
    read_config,
    read_shapes,
    read_weights,
    resolve_checkpoint,
    resolve_device,
    resolve_dtype,
    weight_files,
)
from polyvox.models.generate import capped_max_len, generate_latents
from polyvox.models.layers.audio_vae import AudioVAE, fold_weight_norm
from polyvox.models.prompt import Prompt
from polyvox.models.random_weights import random_lm_tensors, random_vae
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.speech_lm import SpeechLM
from polyvox.models.tokenizer import TextTokenizer, build_test_tokenizer
from polyvox.models.weightless import skip_init, weightless
from polyvox.runtime.startup import stage

AudioInput = bytes | torch.Tensor


def _build_lm(
    config: SpeechConfig,
    state: dict[str, torch.Tensor],
    source: str,
    device,
    dtype,
    lm_class: type[SpeechLM],
) -> SpeechLM:
    with weightless():
        report = compare_keys(lm_class(config), state)
    if report:
        raise CheckpointError(f"{source} does not fit {lm_class.__name__}: {report}")
    with skip_init(), torch.device(device):
        lm = lm_class(config)
    lm = lm.to(dtype)
    load_weights(lm, state, source)
    return lm.eval()


def _build_vae(vae: AudioVAE, state: dict[str, torch.Tensor], source: str, device) -> AudioVAE:
    load_weights(vae, fold_weight_norm(state), source)
    return vae.to(device).eval()


def collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\n", " "))


@dataclass
class LoadedModel:
    config: SpeechConfig
    tokenizer: TextTokenizer
    lm: SpeechLM
    vae: AudioVAE

    # a family's parts, named by its own class
    config_class: ClassVar[type[SpeechConfig]] = SpeechConfig
    lm_class: ClassVar[type[SpeechLM]] = SpeechLM

    @staticmethod
    def make_vae(config: SpeechConfig) -> AudioVAE:
        """An untrained AudioVAE of `config`'s shape."""
        raise NotImplementedError

    @classmethod
    def default_config(cls, size: str) -> SpeechConfig:
        """The family's tiny (CPU tests) or full (published size) config, for random weights."""
        raise NotImplementedError

    @property
    def arch(self) -> str:
        """The release's name, as `/v1/models` and `--arch` spell it."""
        raise NotImplementedError

    def build_prompt(
        self,
        text: str,
        *,
        instructions: str | None = None,
        reference: AudioInput | None = None,
        prompt_text: str | None = None,
        prompt_audio: AudioInput | None = None,
    ) -> Prompt:
        """The prompt of `text` in the modes the family has: `instructions` designs a voice, `reference`
        clones one, `prompt_text` + `prompt_audio` continue a transcribed clip."""
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        return self.lm.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm.dtype

    @property
    def sample_rate(self) -> int:
        """Rate of the synthesised audio (48 kHz)."""
        return self.vae.out_sample_rate

    @property
    def reference_rate(self) -> int:
        """Rate a reference clip is VAE-encoded at: the AudioVAE's input rate (16 kHz)."""
        return self.vae.sample_rate

    @property
    def patch_samples(self) -> int:
        """Output samples per generated patch (7,680 = 160 ms at 48 kHz)."""
        return self.config.patch_size * self.vae.decode_chunk_size

    @classmethod
    def load(
        cls,
        path_or_repo: str | os.PathLike,
        device: str | torch.device | None = "auto",
        dtype: str | torch.dtype | None = "auto",
    ) -> Self:
        """Load a checkpoint directory (official layout) or Hugging Face repo id. The LM runs in `dtype`
        (auto: bfloat16 on CUDA, float32 on CPU); the AudioVAE stays float32, as in the official code."""
        directory = resolve_checkpoint(path_or_repo)
        config = cls.check(directory)
        device = resolve_device(device)
        dtype = resolve_dtype(dtype, device)
        with stage(f"load weights from {directory} to {device}"):
            lm_state, vae_state, lm_source, vae_source = read_weights(directory)
            vae = _build_vae(cls.make_vae(config), vae_state, vae_source, device)
            lm = _build_lm(config, lm_state, lm_source, device, dtype, cls.lm_class)
            tokenizer = TextTokenizer.from_pretrained(directory)
        return cls(config, tokenizer, lm, vae)

    @classmethod
    def check(cls, directory: Path) -> SpeechConfig:
        """The checkpoint's config, once its files are there and the LM's tensor names and shapes (from
        the safetensors header, no weights read) fit it: cheap enough to run before the server listens.
        CheckpointError names what is wrong."""
        try:
            config = cls.config_class.model_validate(read_config(directory))
        except ValidationError as exc:
            name = cls.config_class.__name__.removesuffix("Config")
            raise CheckpointError(f"{directory / 'config.json'} is not a {name} config: {exc}") from exc
        if not (directory / "tokenizer.json").is_file():
            raise CheckpointError(f"{directory} has no tokenizer.json")
        lm_path, vae_path = weight_files(directory)
        shapes = read_shapes(lm_path)
        if shapes is None:
            return config  # a torch pickle has no header: it is checked as it loads
        if vae_path is None and not any(name.startswith(VAE_PREFIX) for name in shapes):
            raise CheckpointError(
                f"{directory} has no AudioVAE weights (expected one of {', '.join(VAE_FILES)}); "
                + REFETCH_HINT
            )
        lm_shapes = {k: v for k, v in shapes.items() if not k.startswith(VAE_PREFIX)}
        with weightless():
            report = compare_keys(cls.lm_class(config), lm_shapes)
        if report:
            raise CheckpointError(f"{lm_path} does not fit {cls.lm_class.__name__}: {report}")
        return config

    @classmethod
    def random(
        cls,
        size: str = "tiny",
        device: str | torch.device | None = "auto",
        dtype: str | torch.dtype | None = "auto",
        seed: int = 0,
        tokenizer_dir: str | os.PathLike | None = None,
        config: SpeechConfig | None = None,
    ) -> Self:
        """Random weights in memory: the same weights `write_random_checkpoint(size=size, seed=seed)` writes
        (of `config`, by default the family's config of `size`). The test tokenizer is written to
        `tokenizer_dir` (a temporary directory when not given)."""
        config = config or cls.default_config(size)
        device = resolve_device(device)
        dtype = resolve_dtype(dtype, device)
        state = dict(random_lm_tensors(config, cls.lm_class, seed, dtype=config.torch_dtype))
        lm = _build_lm(config, state, f"random {size} weights", device, dtype, cls.lm_class)
        vae = random_vae(config, cls.make_vae, seed).to(device)
        with contextlib.ExitStack() as stack:
            if tokenizer_dir is None:
                tokenizer_dir = stack.enter_context(tempfile.TemporaryDirectory())
            build_test_tokenizer(tokenizer_dir, config.lm_config.vocab_size)
            tokenizer = TextTokenizer.from_pretrained(tokenizer_dir)
        return cls(config, tokenizer, lm, vae)

    def encode_reference(self, data: bytes, padding: Padding = "right") -> torch.Tensor:
        """Audio file bytes -> latent patches [T, P, D] (right padding for a reference, left for a
        continuation prompt). Raises polyvox.audio.errors.AudioDecodeError for undecodable bytes."""
        return encode_audio_bytes(self.vae, data, self.config.patch_size, padding)

    def _feats(self, audio: AudioInput | None, padding: Padding) -> torch.Tensor | None:
        if audio is None or isinstance(audio, torch.Tensor):
            return audio
        return self.encode_reference(audio, padding)

    def encode_clip(self, samples: np.ndarray, padding: Padding = "right") -> torch.Tensor:
        """Mono float32 samples at `reference_rate` -> latent patches [T, P, D]."""
        return encode_wav(self.vae, samples, self.config.patch_size, padding)

    def capped_max_len(self, prompt: Prompt, max_len: int) -> int:
        """The most patches to make for `prompt`: `max_len`, or fewer as the official code caps them
        (6 x the target text's tokens + 10)."""
        return capped_max_len(prompt, max_len)

    def synthesize(
        self,
        text: str,
        *,
        instructions: str | None = None,
        reference: AudioInput | None = None,
        prompt_text: str | None = None,
        prompt_audio: AudioInput | None = None,
        seed: int | None = None,
        cfg_value: float = 2.0,
        inference_timesteps: int = 10,
        max_len: int = 2000,
        min_len: int = 2,
        stream: bool = False,
    ) -> np.ndarray | Iterator[np.ndarray]:
        """Speech for `text` as float32 samples at `sample_rate`, or (stream=True) an iterator of 160 ms
        chunks. `instructions` designs a voice; `reference` clones one; `prompt_text` + `prompt_audio`
        continue a transcribed clip. Audio is file bytes or latent patches [T, P, D]. Generation is capped
        at 6 x the text's tokens + 10 patches, as in the official code."""
        prompt = self.build_prompt(
            text,
            instructions=instructions,
            reference=reference,
            prompt_text=prompt_text,
            prompt_audio=prompt_audio,
        )
        patches = generate_latents(
            self.lm,
            prompt,
            cfg_value=cfg_value,
            inference_timesteps=inference_timesteps,
            min_len=min_len,
            max_len=capped_max_len(prompt, max_len),
            seed=seed,
        )
        if stream:
            return self._stream(prompt, patches)
        return self._decode_all(prompt, patches)

    def _latents(self, patches: list[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """Patches [T, P, D] -> VAE latents [1, D, T*P] (float32, on the VAE's device)."""
        stacked = patches if isinstance(patches, torch.Tensor) else torch.stack(patches)
        return stacked.flatten(0, 1).transpose(0, 1).unsqueeze(0).to(self.vae_device, torch.float32)

    @property
    def vae_device(self) -> torch.device:
        return next(self.vae.parameters()).device

    def _decode_all(self, prompt: Prompt, patches: Iterator[torch.Tensor]) -> np.ndarray:
        context = list(prompt.context_patches)
        audio = self.vae.decode(self._latents(context + list(patches)))
        return audio[0, 0, len(context) * self.patch_samples :].float().cpu().numpy()

    def _stream(self, prompt: Prompt, patches: Iterator[torch.Tensor]) -> Iterator[np.ndarray]:
        state = self.vae.init_stream_state(1)
        if len(prompt.context_patches):  # prime the causal decoder with the prompt's tail
            _, state = self.vae.decode_stream(self._latents(prompt.context_patches), state)
        for patch in patches:
            audio, state = self.vae.decode_stream(self._latents(patch.unsqueeze(0)), state)
            yield audio[0].float().cpu().numpy()
