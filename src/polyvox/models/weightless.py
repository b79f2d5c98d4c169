"""Building a model whose weights are about to be overwritten, or only looked at: `skip_init` leaves
`nn.Linear` and `nn.Embedding` uninitialised, and `weightless` builds one for its weights' names and
shapes. Not on PyTorch's meta device: there most operators (the RoPE tables' among them) run through
Python reference implementations whose first use imports `torch._dynamo`, over a second of CPU at every
engine start. On the CPU, uninitialised, the big matrices are `torch.empty`: memory the process never
touches, so never resident, whatever the model's size."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def skip_init() -> Iterator[None]:
    """Modules whose every weight is about to be overwritten need no random initialisation."""
    saved = nn.Linear.reset_parameters, nn.Embedding.reset_parameters
    nn.Linear.reset_parameters = nn.Embedding.reset_parameters = lambda self: None  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        nn.Linear.reset_parameters, nn.Embedding.reset_parameters = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def weightless() -> Iterator[None]:
    """Modules built here have the names and shapes of their weights, on the CPU, uninitialised."""
    with skip_init(), torch.device("cpu"):
        yield
