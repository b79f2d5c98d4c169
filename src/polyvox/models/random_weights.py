"""Random weights for tests and benchmarks, of any family, shaped by its own LM and AudioVAE classes: the
LM gets N(0, 0.02) matrices (norm weights 1, biases 0), the AudioVAE its default initialisation, both from
one seed; `write_safetensors` writes them tensor by tensor. `models/random_checkpoint.py` makes a whole
checkpoint directory of them."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.speech_config import SpeechConfig
from polyvox.models.speech_lm import SpeechLM
from polyvox.models.weightless import weightless

_SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


def lm_shapes(config: SpeechConfig, lm_class: type[SpeechLM]) -> dict[str, torch.Size]:
    """Names and shapes of the LM state, read from a weightless (meta-device) model."""
    with weightless():
        lm = lm_class(config)
    return {name: t.shape for name, t in lm.state_dict().items()}


def random_lm_tensors(
    config: SpeechConfig,
    lm_class: type[SpeechLM],
    seed: int = 0,
    dtype: torch.dtype | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """The LM state one tensor at a time (so a full-size state never has to sit in memory at once)."""
    dtype = dtype or config.torch_dtype
    gen = torch.Generator().manual_seed(seed)
    for name, shape in lm_shapes(config, lm_class).items():
        if len(shape) >= 2:
            tensor = torch.randn(shape, generator=gen).mul_(0.02)
        elif name.endswith("bias"):
            tensor = torch.zeros(shape)
        else:
            tensor = torch.ones(shape)
        yield name, tensor.to(dtype)


def random_vae(config: SpeechConfig, make_vae: Callable[[SpeechConfig], AudioVAE], seed: int = 0) -> AudioVAE:
    """The family's AudioVAE (`make_vae(config)`) with its default initialisation drawn from `seed` (the
    global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_vae(config).eval()


def write_safetensors(path: Path, shapes: dict[str, torch.Size], dtype: torch.dtype, tensors) -> None:
    """Write a .safetensors file tensor by tensor: the header is known from the shapes up front."""
    header: dict[str, object] = {}
    offset = 0
    for name, shape in shapes.items():
        size = math.prod(shape) * dtype.itemsize
        header[name] = {
            "dtype": _SAFETENSORS_DTYPES[dtype],
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for (name, shape), (got_name, tensor) in zip(shapes.items(), tensors, strict=True):
            if name != got_name or tensor.shape != shape or tensor.dtype != dtype:
                raise ValueError(f"tensor {got_name} {tuple(tensor.shape)} does not match the header")
            f.write(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().data)
