"""Tiny LoRA adapters in the official on-disk format, written the way the official fine-tuning script
saves them: the official model with a `LoRAConfig` applied, its `lora_A`/`lora_B` state (here random
instead of trained) in `lora_weights.safetensors`, and `lora_config.json` with the config and base model."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from helpers.official import build_official_model, import_voxcpm
from polyvox.models.voxcpm2.config import VoxCPM2Config


def official_with_lora(config: VoxCPM2Config, tokenizer_dir: Path, lora: dict, seed: int, std: float = 0.15):
    """The official VoxCPM2 of `build_official_model(seed, std)` with LoRA layers for `lora` (zero B)."""
    official = import_voxcpm()
    model = build_official_model(config, tokenizer_dir, seed=seed, std=std)
    model.lora_config = official.LoRAConfig(**lora)
    model._apply_lora()
    return model.float().eval()


def write_adapter(
    directory: Path, config: VoxCPM2Config, tokenizer_dir: Path, lora: dict, seed: int, scale: float = 0.1
) -> Path:
    """A random adapter for `lora` (official LoRAConfig fields) on a `config`-shaped base, saved officially.

    `scale` keeps the update moderate: far larger random updates make the tiny random model chaotic, so
    float rounding alone grows past the parity tolerance within a few patches."""
    official = import_voxcpm()
    model = build_official_model(config, tokenizer_dir, seed=0)
    model.lora_config = official.LoRAConfig(**lora)
    model._apply_lora()
    g = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in model.state_dict().items():
        if "lora_" in key:
            state[key] = torch.randn(value.shape, generator=g) * scale
    directory.mkdir(parents=True, exist_ok=True)
    save_file(state, str(directory / "lora_weights.safetensors"))
    body = {"base_model": "tiny-random", "lora_config": model.lora_config.model_dump()}
    (directory / "lora_config.json").write_text(json.dumps(body))
    return directory


LM_AND_DIT = {"enable_lm": True, "enable_dit": True, "r": 4, "alpha": 8}
EVERYWHERE = {
    "enable_lm": True,
    "enable_dit": True,
    "enable_proj": True,
    "r": 3,
    "alpha": 5,
    "target_modules_lm": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "target_modules_dit": ["q_proj", "v_proj", "out_proj", "in_proj", "cond_proj"],
    "target_proj_modules": [
        "enc_to_lm_proj",
        "lm_to_dit_proj",
        "res_to_dit_proj",
        "fusion_concat_proj",
        "stop_proj",
    ],
}
