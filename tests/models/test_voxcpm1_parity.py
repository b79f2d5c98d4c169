"""VoxCPM-0.5B ("voxcpm1") and VoxCPM 1.5 ("voxcpm1.5") equal the official `VoxCPMModel`: the same tiny
weights and noise give the same latents in both prompt modes the model has (zero-shot, continuation),
the same prompt token ids, and the same AudioVAE V1 encoding and decoding."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.official_v1 import build_official_v1
from polyvox.models.generate import generate_latents
from polyvox.models.layers.audio_vae import fold_weight_norm
from polyvox.models.prompt import build_prompt
from polyvox.models.tokenizer import TextTokenizer, build_test_tokenizer
from polyvox.models.voxcpm1.audio_vae import audio_vae_v1
from polyvox.models.voxcpm1.config import VoxCPM1Config
from polyvox.models.voxcpm1.loaded_model import STREAMING_PREFIX_LEN
from polyvox.models.voxcpm1.model import VoxCPM1LM

TEXT = "你好世界，今天天气很好 hello world 123"
PROMPT_TEXT = "我们喜欢中文语音合成。"
VARIANTS = ["voxcpm1", "voxcpm1.5"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return build_test_tokenizer(tmp_path_factory.mktemp("tok"), VoxCPM1Config.tiny().lm_config.vocab_size)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return TextTokenizer.from_pretrained(tokenizer_dir)


@pytest.fixture(scope="module", params=VARIANTS)
def pair(request, tokenizer_dir):
    """(config, official VoxCPMModel, polyvox VoxCPM1LM and AudioVAE V1 with its weights)."""
    config = VoxCPM1Config.tiny(request.param)
    official = build_official_v1(config, tokenizer_dir)
    lm = VoxCPM1LM(config).eval()
    state = {k: v for k, v in official.state_dict().items() if not k.startswith("audio_vae.")}
    lm.load_state_dict(state, strict=True)
    vae = audio_vae_v1(config.vae_config).eval()
    vae.load_state_dict(fold_weight_norm(official.audio_vae.state_dict()), strict=True)
    return config, official, lm, vae


def _patches(config: VoxCPM1Config, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, config.patch_size, config.feat_dim, generator=g)


def _prompt(config, tokenizer, mode, audio):
    kw = {"prompt_text": PROMPT_TEXT, "prompt_audio": audio} if mode == "continuation" else {}
    return build_prompt(
        tokenizer,
        TEXT,
        patch_size=config.patch_size,
        feat_dim=config.feat_dim,
        streaming_prefix_len=STREAMING_PREFIX_LEN,
        **kw,
    )


@pytest.mark.parametrize("mode", ["zero_shot", "continuation"])
def test_latents_match_official(pair, tokenizer, mode):
    config, official, lm, _ = pair
    audio = _patches(config, 3, seed=2)
    cache = {"prompt_text": PROMPT_TEXT, "audio_feat": audio} if mode == "continuation" else None
    kw = dict(min_len=6, max_len=8, inference_timesteps=6, cfg_value=2.5)
    torch.manual_seed(11)
    _, _, expected = official.generate_with_prompt_cache(target_text=TEXT, prompt_cache=cache, **kw)
    if mode == "continuation":  # the official sequence starts with the prompt patches it primes with
        expected = expected[STREAMING_PREFIX_LEN - 1 :]
    prompt = _prompt(config, tokenizer, mode, audio)
    got = torch.stack(list(generate_latents(lm, prompt, seed=11, max_len_ratio=6.0, **kw)))
    assert got.shape == expected.shape == (8, config.patch_size, config.feat_dim)
    assert (got - expected).abs().max() < 1e-4


def test_stop_rule_matches_official(tokenizer_dir, tokenizer):
    """As many patches as the official loop, with runs that end by the stop head before max_len."""
    config = VoxCPM1Config.tiny("voxcpm1")  # the LMs' stop rule is one for both; this VAE is cheaper
    official = build_official_v1(config, tokenizer_dir, seed=3, std=0.1)
    lm = VoxCPM1LM(config).eval()
    lm.load_state_dict({k: v for k, v in official.state_dict().items() if not k.startswith("audio_vae.")})
    kw = dict(min_len=2, max_len=12, inference_timesteps=3, cfg_value=2.0)
    lengths = []
    for seed in range(4):
        torch.manual_seed(seed)
        _, _, expected = official.generate_with_prompt_cache(target_text=TEXT, prompt_cache=None, **kw)
        prompt = _prompt(config, tokenizer, "zero_shot", None)
        got = torch.stack(list(generate_latents(lm, prompt, seed=seed, max_len_ratio=6.0, **kw)))
        assert got.shape == expected.shape
        assert (got - expected).abs().max() < 1e-4
        lengths.append(len(got))
    assert any(kw["min_len"] + 2 < n < kw["max_len"] for n in lengths), lengths


def test_prompt_token_ids_match_official(pair, tokenizer):
    """The continuation layout `[prompt_text + text, 101, prompt audio]` with the official tokenizer ids."""
    config, official, _, _ = pair
    audio = _patches(config, 3, seed=2)
    prompt = _prompt(config, tokenizer, "continuation", audio)
    ids = list(official.text_tokenizer(PROMPT_TEXT + TEXT)) + [official.audio_start_token]
    assert prompt.tokens.tolist() == ids + [0] * 3
    assert prompt.audio_mask.tolist() == [0] * len(ids) + [1] * 3
    assert torch.equal(prompt.feats[len(ids) :], audio)
    assert prompt.target_text_len == len(official.text_tokenizer(TEXT))


def test_vae_encoding_matches_official(pair):
    config, official, _, vae = pair
    rate = config.vae_config.sample_rate
    g = torch.Generator().manual_seed(1)
    t = torch.arange(int(0.37 * rate)) / rate  # not a whole latent frame: right-padded
    wav = (0.3 * torch.sin(2 * math.pi * 180 * t) + 0.05 * torch.randn(t.shape, generator=g)).unsqueeze(0)
    with torch.no_grad():
        expected = official.audio_vae.encode(wav, rate)
    got = vae.encode(wav)
    assert (
        got.shape == expected.shape == (1, config.vae_config.latent_dim, math.ceil(len(t) / vae.hop_length))
    )
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_vae_decoding_matches_official_whole_and_streamed(pair):
    config, official, _, vae = pair
    latents = torch.randn(1, config.vae_config.latent_dim, 6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = official.audio_vae.decode(latents)
    got = vae.decode(latents)
    assert got.shape == expected.shape == (1, 1, 6 * vae.decode_chunk_size)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    state, pieces = vae.init_stream_state(1), []
    for i in range(0, 6, 2):
        audio, state = vae.decode_stream(latents[..., i : i + 2], state)
        pieces.append(audio)
    torch.testing.assert_close(torch.cat(pieces, dim=-1), expected[:, 0], atol=1e-4, rtol=0)


def test_output_rate_is_the_models_own(pair):
    config, _, _, vae = pair
    rate = 16000 if config.variant == "voxcpm1" else 44100
    assert vae.sample_rate == vae.out_sample_rate == rate
    assert config.patch_size * vae.decode_chunk_size == rate * config.patch_size // 25  # 25 Hz latents
