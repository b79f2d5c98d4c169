"""Host-to-device copies that never wait for the device. A blocking copy from ordinary host memory
synchronises the CUDA stream first, so every such copy in a step would let the GPU run dry while the
host caught up; from pinned memory with `non_blocking` the copy is queued behind the work already
launched instead. On any other device these are plain copies."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def to_device(
    tensor: torch.Tensor, device: torch.device | str, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """`tensor` (on the host) on `device`, converted to `dtype` there if given."""
    device = torch.device(device)
    if device.type == "cuda" and tensor.device.type == "cpu":
        tensor = tensor.pin_memory().to(device, non_blocking=True)
    else:
        tensor = tensor.to(device)
    return tensor if dtype is None else tensor.to(dtype)


def device_tensor(values: Sequence, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """`torch.tensor(values, dtype=dtype)` made on the host and queued to `device`."""
    return to_device(torch.tensor(values, dtype=dtype), device)


def copy_from_host(target: torch.Tensor, source: torch.Tensor) -> None:
    """`target.copy_(source)` for a device `target` and a host `source`, queued without waiting."""
    if target.device.type == "cuda":
        source = source.pin_memory()
    target.copy_(source, non_blocking=True)
