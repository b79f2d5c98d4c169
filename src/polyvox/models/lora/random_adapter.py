"""Random LoRA adapters in the official on-disk format for a model's shapes: for tests, benchmarks and
trying the serving path without a fine-tune (the official fine-tuning code writes real ones)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from .files import CONFIG_FILE, WEIGHTS_SAFETENSORS, AdapterConfig
from .sites import linear_sites, selected_sites


def write_random_adapter(
    model: nn.Module,
    directory: str | Path,
    config: AdapterConfig,
    default_proj: list[str],
    *,
    seed: int = 0,
    std: float = 0.05,
) -> Path:
    """Write an adapter of `config` for `model`'s layers, every weight ~ N(0, std), into `directory`."""
    sites = linear_sites(model)
    chosen = selected_sites(sites, config, default_proj)
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name in chosen:
        site = sites[name]
        state[f"{name}.lora_A"] = torch.randn(config.r, site.in_features, generator=generator) * std
        state[f"{name}.lora_B"] = torch.randn(site.out_features, config.r, generator=generator) * std
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path / WEIGHTS_SAFETENSORS))
    body = config.model_dump()
    if body["target_proj_modules"] is None:
        body["target_proj_modules"] = list(default_proj)
    (path / CONFIG_FILE).write_text(json.dumps({"base_model": "random", "lora_config": body}, indent=2))
    return path
