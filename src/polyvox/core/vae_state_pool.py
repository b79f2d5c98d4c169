"""The streaming VAE decoder's state of every request, kept in one set of device buffers indexed by
slot, so a step gathers and scatters the whole batch's state with two operations per buffer instead
of slicing and concatenating per request. Slot 0 is scratch, never handed out: the padding rows of a
CUDA-graph batch decode into it. A continuation's slot starts primed with its prompt's audio tail; a
voice's tail is the same on every request, so its primed state is kept (by content, the last few) and
copied in rather than decoded again."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import torch

from polyvox.models.interface import AudioVAE, StreamState

PRIMED_STATES = 16  # primed states kept, the most recently used (a few voices' tails)


class VAEStatePool:
    scratch_slot = 0

    def __init__(self, vae: AudioVAE, capacity: int, device: torch.device, dtype: torch.dtype):
        self.vae, self.device, self.dtype = vae, device, dtype
        self.buffers = vae.init_stream_state(capacity + 1, device, dtype).buffers
        self.free = list(range(capacity, 0, -1))
        self.generation = 0  # bumped when the buffers move (captured graphs then hold stale ones)
        self.primed: OrderedDict[bytes, StreamState] = OrderedDict()

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

    def acquire_primed(self, context: torch.Tensor) -> int:
        """A slot whose decoder state has decoded `context` (float32[C, P, D] latent patches on the CPU,
        a prompt's audio tail) from silence: decoded once per distinct tail, then copied."""
        slot = self.acquire()
        index = torch.tensor([slot], device=self.device)
        key = (
            hashlib.blake2b(context.numpy().tobytes(), digest_size=16).digest() + repr(context.shape).encode()
        )
        state = self.primed.get(key)
        if state is None:
            latents = context.to(self.device, self.dtype).flatten(0, 1).T.unsqueeze(0).contiguous()
            _, state = self.vae.decode_stream(latents, self.gather(index))
            state = StreamState([buffer.clone() for buffer in state.buffers])
            self.primed[key] = state
            if len(self.primed) > PRIMED_STATES:
                self.primed.popitem(last=False)
        self.primed.move_to_end(key)
        self.scatter(index, state)
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
