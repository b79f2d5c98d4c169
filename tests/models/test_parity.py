"""Generated latents equal the official implementation's in every prompt mode (same weights, same
seed, the official prompt building and generation loop on its side)."""

from __future__ import annotations

import pytest
import torch

from helpers.official import build_official_model
from polyvox.models.generate import generate_latents
from polyvox.models.prompt import build_prompt
from polyvox.models.voxcpm2.config import VoxCPM2Config

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


def test_injected_noise_replaces_the_seeded_draws(official_lm, polyvox_lm, tokenizer, tiny_config):
    """`noise [T, D, P]` given to generate_latents is used patch by patch, in order."""
    kw = dict(min_len=3, max_len=4, inference_timesteps=4, cfg_value=2.0)
    expected = official_latents(official_lm, TEXT, None, seed=21, **kw)
    g = torch.Generator().manual_seed(21)
    noise = torch.stack([torch.randn(1, tiny_config.feat_dim, tiny_config.patch_size, generator=g)[0]
                         for _ in range(kw["max_len"])])  # fmt: skip
    prompt = build_prompt(tokenizer, TEXT, patch_size=tiny_config.patch_size, feat_dim=tiny_config.feat_dim)
    got = torch.stack(list(generate_latents(polyvox_lm, prompt, noise=noise, **kw)))
    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4
    other = torch.stack(list(generate_latents(polyvox_lm, prompt, noise=noise.flip(0), **kw)))
    assert (other - expected).abs().max() > 1e-2


@pytest.mark.parametrize("temperature", [0.6, 1.3])
def test_cfm_solve_with_temperature_matches_official(official_lm, polyvox_lm, tiny_config, temperature):
    """The LocDiT CFM solve (sway grid, CFG, CFG-Zero*) on a batch of 2, noise scaled by temperature as
    the official `UnifiedCFM` scales its draw."""
    g = torch.Generator().manual_seed(4)
    mu = torch.randn(2, 2 * tiny_config.dit_config.hidden_dim, generator=g)
    cond = torch.randn(2, tiny_config.feat_dim, tiny_config.patch_size, generator=g)
    torch.manual_seed(8)
    expected = official_lm.feat_decoder(
        mu=mu,
        n_timesteps=5,
        patch_size=tiny_config.patch_size,
        cond=cond,
        temperature=temperature,
        cfg_value=2.5,
    )
    torch.manual_seed(8)
    z = torch.randn(2, tiny_config.feat_dim, tiny_config.patch_size)
    cfg = torch.full((2,), 2.5)
    with torch.inference_mode():
        got = polyvox_lm.feat_decoder(mu, cond, z * temperature, cfg, 5)
        plain = polyvox_lm.feat_decoder(mu, cond, z, cfg, 5)
    assert (got - expected).abs().max() < 1e-4
    assert (plain - expected).abs().max() > 1e-3  # the temperature changed the result


def _with_rope_factors(config: VoxCPM2Config, original_max: int, seed: int) -> VoxCPM2Config:
    """The tiny config with random LongRoPE factors (1 to 8) and the given original context length."""
    g = torch.Generator().manual_seed(seed)
    half = config.lm_config.head_dim // 2
    scaling = {
        "type": "longrope",
        "long_factor": (1 + 7 * torch.rand(half, generator=g)).tolist(),
        "short_factor": (1 + 7 * torch.rand(half, generator=g)).tolist(),
        "original_max_position_embeddings": original_max,
    }
    data = config.model_dump()
    data["lm_config"]["rope_scaling"] = scaling
    return VoxCPM2Config.model_validate(data)


@pytest.mark.parametrize("regime", ["short", "long"])
def test_longrope_factors_match_official(regime, tiny_config, tokenizer_dir, tokenizer):
    """Non-trivial LongRoPE: short factors when the context is the original one, long factors and the
    attention scaling when max_position_embeddings exceeds it (the tiny config's factors are all 1)."""
    max_pos = tiny_config.lm_config.max_position_embeddings
    config = _with_rope_factors(tiny_config, max_pos if regime == "short" else max_pos // 8, seed=5)
    official = build_official_model(config, tokenizer_dir, seed=0, std=0.15)  # attention far from uniform
    ours = polyvox_twin(official, config)
    kw = dict(min_len=3, max_len=4, inference_timesteps=4, cfg_value=2.0)
    expected = official_latents(official, TEXT, None, seed=13, **kw)
    got = polyvox_latents(ours, tokenizer, config, 13, {}, **kw)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4
    plain = polyvox_latents(polyvox_twin(official, tiny_config), tokenizer, tiny_config, 13, {}, **kw)
    assert plain.shape != got.shape or (plain - got).abs().max() > 1e-3  # the factors mattered
