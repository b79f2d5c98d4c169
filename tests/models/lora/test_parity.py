"""A request with a LoRA adapter gives the official model's latents with `load_lora_weights` of the same
adapter files (same weights, same noise), in the prompt modes that exercise every adapted layer."""

from __future__ import annotations

import pytest

from helpers.official_lora import official_with_lora

from ..test_parity import mode_inputs, official_latents, polyvox_latents
from .conftest import CONFIGS

KW = dict(min_len=6, max_len=8, inference_timesteps=6, cfg_value=2.5)


@pytest.mark.parametrize(
    ("adapter", "mode"),
    [("lm_dit", "zero_shot"), ("everywhere", "reference"), ("everywhere", "continuation")],
)
def test_adapter_latents_match_official_load_lora_weights(
    adapter, mode, serving_lm, adapter_dirs, tiny_config, tokenizer_dir, tokenizer, latents
):
    official = official_with_lora(tiny_config, tokenizer_dir, CONFIGS[adapter][0], seed=0)
    loaded, skipped = official.load_lora_weights(str(adapter_dirs[adapter]))
    assert loaded and not skipped
    prompt_kw, target, cache = mode_inputs(mode, latents)
    expected = official_latents(official, target, cache, seed=11, **KW)

    use = serving_lm.lora.acquire(adapter)
    got = polyvox_latents(serving_lm, tokenizer, tiny_config, 11, prompt_kw, adapter_slot=use.slot, **KW)
    base = polyvox_latents(serving_lm, tokenizer, tiny_config, 11, prompt_kw, **KW)

    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4
    assert (base[: len(got)] - got[: len(base)]).abs().max() > 1e-2  # the adapter does change the voice
