"""The continuous-batching engine serves VoxCPM 1.x as it serves VoxCPM2: zero-shot and continuation
requests in one batch (chunked prefill beside decodes) give each the latents of batch-1 generation and
the audio of decoding them whole, at the model's own rate, one patch per chunk."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.clips import wav_bytes
from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.sequence import SamplingParams
from polyvox.models.generate import generate_latents
from polyvox.models.voxcpm1.loaded_model import VoxCPM1

ATOL = 1e-4


@pytest.fixture(scope="module", params=["voxcpm1", "voxcpm1.5"])
def model(request) -> VoxCPM1:
    return VoxCPM1.random("tiny", device="cpu", dtype="float32", variant=request.param)


def _clip(model: VoxCPM1, seconds: float, freq: float) -> bytes:
    t = np.arange(int(seconds * model.reference_rate)) / model.reference_rate
    return wav_bytes(0.3 * np.sin(2 * np.pi * freq * t), model.reference_rate)


def _decoded_whole(model: VoxCPM1, context: torch.Tensor, patches: list[torch.Tensor]) -> np.ndarray:
    """The VAE decode of the prompt's context patches and the generated ones at once, context cut off."""
    latents = torch.cat([context, torch.stack(patches)]).flatten(0, 1).T.unsqueeze(0)
    return model.vae.decode(latents)[0, 0, len(context) * model.patch_samples :].numpy()


def test_a_mixed_batch_equals_batch_1_generation_and_whole_decoding(model):
    clip = _clip(model, 0.7, 220.0)
    requests = [
        (model.build_prompt("Hello there, friend."), SamplingParams(seed=1, min_len=5, max_len=5)),
        (
            model.build_prompt("and then it went on", prompt_text="So it began ", prompt_audio=clip),
            SamplingParams(seed=2, min_len=4, max_len=4, cfg_value=3.0),
        ),
        (model.build_prompt("The quick brown fox."), SamplingParams(seed=3, max_len=6, temperature=0.7)),
        (
            model.build_prompt("Yes.", prompt_text="A clip ", prompt_audio=clip),
            SamplingParams(seed=4, min_len=3, max_len=3, inference_timesteps=4),
        ),
    ]
    config = BatchingConfig(kv_block_size=4, num_kv_blocks=256, max_num_batched_tokens=24)
    core = EngineCore(model.lm, model.vae, model.config, config, torch.device("cpu"), torch.float32)
    outputs = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    assert core.stats().mean_batch_size > 1
    for (prompt, sp), (latents, audio) in zip(requests, outputs, strict=True):
        alone = list(
            generate_latents(
                model.lm,
                prompt,
                seed=sp.seed,
                min_len=sp.min_len,
                max_len=sp.max_len,
                cfg_value=sp.cfg_value,
                inference_timesteps=sp.inference_timesteps,
                temperature=sp.temperature,
            )
        )
        want = torch.stack(alone).flatten(0, 1).T
        assert latents.shape == want.shape
        assert (latents - want).abs().max() < ATOL
        assert audio.size == len(alone) * model.patch_samples
        assert np.abs(audio - _decoded_whole(model, prompt.context_patches, alone)).max() < ATOL
    assert core.block_manager.num_free == core.block_manager.num_blocks


def test_a_repeated_continuation_prompt_reuses_its_cached_kv_and_speaks_the_same(model):
    prompt = model.build_prompt(
        "Again and again.", prompt_text="A clip ", prompt_audio=_clip(model, 0.7, 330.0)
    )
    params = SamplingParams(seed=5, min_len=3, max_len=3)
    config = BatchingConfig(kv_block_size=4, num_kv_blocks=256)
    core = EngineCore(model.lm, model.vae, model.config, config, torch.device("cpu"), torch.float32)
    (first,) = core.generate([prompt], [params])
    hits = core.stats().prefix_cache_hits
    (second,) = core.generate([prompt], [params])
    assert core.stats().prefix_cache_hits > hits  # the prompt's full blocks came from the cache
    assert (first[0] - second[0]).abs().max() < ATOL
    assert np.abs(first[1] - second[1]).max() < ATOL
