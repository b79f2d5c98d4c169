"""`write_random_checkpoint`: a complete checkpoint directory of any release polyvox serves, with random
weights, in the official layout (`polyvox checkpoint random`; tests and benchmarks). The weights come
from random_weights.py, shaped by the release's own LM and AudioVAE classes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import torch

from polyvox.models.architectures import config_for_arch, model_class
from polyvox.models.random_weights import (
    lm_shapes,
    random_lm_tensors,
    random_vae,
    write_safetensors,
)
from polyvox.models.tokenizer import build_test_tokenizer

Size = Literal["tiny", "full"]


def write_random_checkpoint(
    out_dir: str | os.PathLike, size: Size = "tiny", seed: int = 0, arch: str = "voxcpm2"
) -> Path:
    """A complete checkpoint directory of `arch` (config.json, model.safetensors, audiovae.pth with
    weight-norm pairs under "state_dict", tokenizer files) with random weights; tiny is float32, full
    bfloat16."""
    config = config_for_arch(arch, size)
    model = model_class(arch)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config.to_json(out / "config.json")
    partial = out / "model.safetensors.partial"
    tensors = random_lm_tensors(config, model.lm_class, seed)
    write_safetensors(partial, lm_shapes(config, model.lm_class), config.torch_dtype, tensors)
    partial.replace(out / "model.safetensors")
    vae = random_vae(config, model.make_vae, seed)
    torch.save({"state_dict": vae.official_state_dict()}, out / "audiovae.pth")
    build_test_tokenizer(out, config.lm_config.vocab_size)
    return out
