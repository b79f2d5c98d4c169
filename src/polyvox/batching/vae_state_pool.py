"""The streaming VAE decoder's state of every request, kept in one set of device buffers indexed by
slot, so a step gathers and scatters the whole batch's state with two operations per buffer instead
of slicing and concatenating per request. Slot 0 is scratch, never handed out: the padding rows of a
CUDA-graph batch decode into it."""

from __future__ import annotations

import torch

from polyvox.models.interface import AudioVAE, StreamState


class VAEStatePool:
    scratch_slot = 0

    def __init__(self, vae: AudioVAE, capacity: int, device: torch.device, dtype: torch.dtype):
        self.vae, self.device, self.dtype = vae, device, dtype
        self.buffers = vae.init_stream_state(capacity + 1, device, dtype).buffers
        self.free = list(range(capacity, 0, -1))
        self.generation = 0  # bumped when the buffers move (captured graphs then hold stale ones)

    @property
    def capacity(self) -> int:
        return self.buffers[0].shape[0] - 1

    @property
    def in_use(self) -> int:
        return self.capacity - len(self.free)

    def acquire(self) -> int:
        """A slot holding a fresh (silent) decoder state; the pool doubles when it is full."""
        if not self.free:
            self._grow()
        slot = self.free.pop()
        for buffer in self.buffers:
            buffer[slot].zero_()
        return slot

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def gather(self, slots: torch.Tensor) -> StreamState:
        return StreamState([buffer.index_select(0, slots) for buffer in self.buffers])

    def scatter(self, slots: torch.Tensor, state: StreamState) -> None:
        for buffer, value in zip(self.buffers, state.buffers, strict=True):
            buffer.index_copy_(0, slots, value.to(buffer.dtype))

    def _grow(self) -> None:
        rows = self.buffers[0].shape[0]
        extra = self.vae.init_stream_state(rows, self.device, self.dtype).buffers
        self.buffers = [torch.cat([buffer, more]) for buffer, more in zip(self.buffers, extra, strict=True)]
        self.free.extend(range(2 * rows - 1, rows - 1, -1))
        self.generation += 1
