"""VoxCPM 1.x serves LoRA adapters too (its model is VoxCPM2LM's with two fusions overridden): a request
with an adapter gives the official VoxCPMModel's latents with `load_lora_weights` of the same files."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from helpers.official_v1 import build_official_v1
from polyvox.models.generate import generate_latents
from polyvox.models.prompt import build_prompt
from polyvox.models.tokenizer import TextTokenizer, build_test_tokenizer
from polyvox.models.voxcpm1.config import VoxCPM1Config
from polyvox.models.voxcpm1.model import VoxCPM1LM

TEXT = "hello world 123"
LORA = {"enable_lm": True, "enable_dit": True, "enable_proj": True, "r": 4, "alpha": 8}


@pytest.mark.parametrize("variant", ["voxcpm1", "voxcpm1.5"])
def test_voxcpm1_adapter_latents_match_official(variant, tmp_path):
    config = VoxCPM1Config.tiny(variant)
    tokenizer_dir = build_test_tokenizer(tmp_path / "tok", config.lm_config.vocab_size)
    official = build_official_v1(config, tokenizer_dir)
    from voxcpm.model.voxcpm import LoRAConfig  # importable once build_official_v1 stubbed torchaudio

    ours = VoxCPM1LM(config).eval()
    ours.load_state_dict({k: v for k, v in official.state_dict().items() if not k.startswith("audio_vae.")})

    official.lora_config = LoRAConfig(**LORA)
    official._apply_lora()  # the official injection, then a "trained" (random) adapter saved officially
    g = torch.Generator().manual_seed(3)
    state = {
        k: torch.randn(v.shape, generator=g) * 0.1 for k, v in official.state_dict().items() if "lora_" in k
    }
    assert any(k.startswith("enc_to_lm_proj.") for k in state)  # the projections are adapted too
    save_file(state, str(tmp_path / "lora_weights.safetensors"))
    body = {"base_model": variant, "lora_config": official.lora_config.model_dump()}
    (tmp_path / "lora_config.json").write_text(json.dumps(body))
    loaded, skipped = official.load_lora_weights(str(tmp_path))
    assert loaded and not skipped

    kw = dict(min_len=6, max_len=8, inference_timesteps=6, cfg_value=2.5)
    torch.manual_seed(11)
    _, _, expected = (
        official.float().eval().generate_with_prompt_cache(target_text=TEXT, prompt_cache=None, **kw)
    )

    bank = ours.serve_adapters(max_loaded=2, max_rank=8)
    bank.register("v1", tmp_path)
    slot = bank.acquire("v1").slot
    tokenizer = TextTokenizer.from_pretrained(tokenizer_dir)
    prompt = build_prompt(tokenizer, TEXT, patch_size=config.patch_size, feat_dim=config.feat_dim)
    got = torch.stack(
        list(generate_latents(ours, prompt, seed=11, max_len_ratio=6.0, adapter_slot=slot, **kw))
    )
    base = torch.stack(list(generate_latents(ours, prompt, seed=11, max_len_ratio=6.0, **kw)))
    assert got.shape == expected.shape
    assert (got - expected).abs().max() < 1e-4
    assert (base[: len(got)] - got[: len(base)]).abs().max() > 1e-2
