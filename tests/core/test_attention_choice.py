"""Which paged-attention backend an engine runs: flash-attn only for CUDA fp16/bf16, never on CPU."""

from __future__ import annotations

import sys
import types

import torch

from polyvox.core.sequence import SamplingParams
from polyvox.models.layers import attention
from polyvox.models.layers.attention import use_backend


def test_an_installed_flash_attn_is_not_used_for_cpu_batches(monkeypatch, tiny):
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))  # "installed"
    try:
        core = tiny.core(attention_backend="auto")
        assert core.runner.attention_backend == "sdpa"
        assert not attention._flash_applies(torch.randn(3, 4, 8))
        core.generate(
            [tiny.prompt("Still speaks.")], [SamplingParams(seed=1, min_len=2, max_len=2)]
        )  # and serves through SDPA
    finally:
        use_backend("sdpa")
