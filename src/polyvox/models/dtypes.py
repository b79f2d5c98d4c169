"""The precisions a model runs in, by name: the names `--dtype` and config.json take (aliases included)
and the one each means. Names, not PyTorch's dtypes, so what a server will run in is known in a process
that never imports PyTorch (the API side of an engine that runs in processes of its own on the CPU)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}
CONFIG_DTYPES = ("bfloat16", "bf16", "float16", "fp16", "float32", "fp32")  # what config.json may say


def torch_dtype(name: str) -> torch.dtype:
    """PyTorch's dtype for a name of `DTYPE_NAMES` (KeyError for another)."""
    import torch

    dtype: torch.dtype = getattr(torch, DTYPE_NAMES[name])
    return dtype
