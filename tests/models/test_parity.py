"""Generated latents equal the official implementation's in every prompt mode (same weights, same
seed, the official prompt building and generation loop on its side)."""

from __future__ import annotations

import pytest
import torch

from helpers.official import build_official_model
from polyvox.models.voxcpm2.generate import generate_latents
from polyvox.models.voxcpm2.prompt import build_prompt

from .conftest import polyvox_twin

TEXT = "你好世界，今天天气很好 hello world 123"
PROMPT_TEXT = "我们喜欢中文语音合成。"
DESCRIPTION = "A calm, warm voice"


def official_latents(official, target_text, cache, seed, **kw) -> torch.Tensor:
    """The official generation (prompt cache path, as `VoxCPM.generate` uses): generated patches [T, P, D]."""
    torch.manual_seed(seed)
    _, _, feats = official.generate_with_prompt_cache(target_text=target_text, prompt_cache=cache, **kw)
    return feats


def polyvox_latents(model, tokenizer, config, seed, prompt_kw, **kw) -> torch.Tensor:
    prompt = build_prompt(
        tokenizer, TEXT, patch_size=config.patch_size, feat_dim=config.feat_dim, **prompt_kw
    )
    return torch.stack(list(generate_latents(model, prompt, seed=seed, max_len_ratio=6.0, **kw)))


def mode_inputs(mode: str, latents):
    """(our build_prompt kwargs, the official target text, the official prompt cache) of a mode."""
    ref, audio = latents(5, seed=1), latents(3, seed=2)
    return {
        "zero_shot": ({}, TEXT, None),
        "design": ({"description": DESCRIPTION}, f"({DESCRIPTION}){TEXT}", None),
        "reference": ({"reference": ref}, TEXT, {"ref_audio_feat": ref, "mode": "reference"}),
        "continuation": (
            {"prompt_text": PROMPT_TEXT, "prompt_audio": audio},
            TEXT,
            {"prompt_text": PROMPT_TEXT, "audio_feat": audio, "mode": "continuation"},
        ),
        "reference_continuation": (
            {"reference": ref, "prompt_text": PROMPT_TEXT, "prompt_audio": audio},
            TEXT,
            {
                "ref_audio_feat": ref,
                "prompt_text": PROMPT_TEXT,
                "audio_feat": audio,
                "mode": "ref_continuation",
            },
        ),
    }[mode]


@pytest.mark.parametrize(
    "mode", ["zero_shot", "design", "reference", "continuation", "reference_continuation"]
)
def test_latents_match_official(mode, official_lm, polyvox_lm, tokenizer, tiny_config, latents):
    prompt_kw, target, cache = mode_inputs(mode, latents)
    kw = dict(min_len=6, max_len=8, inference_timesteps=6, cfg_value=2.5)
    expected = official_latents(official_lm, target, cache, seed=11, **kw)
    got = polyvox_latents(polyvox_lm, tokenizer, tiny_config, 11, prompt_kw, **kw)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4


def test_different_seeds_give_different_latents(polyvox_lm, tokenizer, tiny_config):
    kw = dict(min_len=3, max_len=4, inference_timesteps=4)
    a = polyvox_latents(polyvox_lm, tokenizer, tiny_config, 1, {}, **kw)
    b = polyvox_latents(polyvox_lm, tokenizer, tiny_config, 2, {}, **kw)
    assert (a - b).abs().max() > 1e-2


def test_stop_rule_matches_official(tiny_config, tokenizer_dir, tokenizer):
    """Same number of patches as the official loop; at least one run ends by the stop head
    (after min_len, before max_len), so the rule itself is exercised."""
    official = build_official_model(tiny_config, tokenizer_dir, seed=3, std=0.1)
    ours = polyvox_twin(official, tiny_config)
    kw = dict(min_len=2, max_len=12, inference_timesteps=3, cfg_value=2.0)
    lengths = []
    for seed in range(4):
        expected = official_latents(official, TEXT, None, seed=seed, **kw)
        got = polyvox_latents(ours, tokenizer, tiny_config, seed, {}, **kw)
        assert got.shape == expected.shape
        assert (got - expected).abs().max() < 1e-4
        lengths.append(len(got))
    assert any(kw["min_len"] + 2 < n < kw["max_len"] for n in lengths), lengths
