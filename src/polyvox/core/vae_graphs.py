"""The streaming VAE decode of a step — gather each sequence's decoder state by slot, decode one patch
per sequence, scatter the new state back — as one CUDA graph per batch bucket.

A batch runs in the smallest bucket that holds it; padding rows decode silence into the pool's scratch
slot, which no sequence owns. Capture runs on the scratch slot only (the decode is not idempotent, so
it must never run twice on a real state); the first replay on real inputs is checked against the
eager decode, and on disagreement the eager result is kept and the graphs are not used again (the
fallback policy of `cuda_graph.GraphSet`, as for any failure of the graph path). If the pool grows,
its buffers move and the graphs are captured anew. `capture=False` runs the same padded path eagerly
(how the CPU tests check it).
"""

from __future__ import annotations

import torch

from polyvox.core.cuda_graph import GraphSet
from polyvox.core.graphs import batch_buckets
from polyvox.core.vae_state_pool import VAEStatePool
from polyvox.models.interface import AudioVAE, copy_from_host


class _StaticDecode:
    def __init__(self, batch: int, latent_shape: torch.Size, pool: VAEStatePool) -> None:
        self.latents = torch.zeros((batch, *latent_shape), dtype=pool.dtype, device=pool.device)
        self.slots = torch.full((batch,), pool.scratch_slot, dtype=torch.long, device=pool.device)
        self.generation = pool.generation
        self.graph: torch.cuda.CUDAGraph | None = None
        self.audio: torch.Tensor | None = None
        self.checked = False  # a replay on real inputs has matched the eager decode


class VAEDecodeGraphs(GraphSet):
    def __init__(self, vae: AudioVAE, pool: VAEStatePool, max_batch: int, capture: bool) -> None:
        super().__init__("the VAE decode")
        self.vae, self.pool = vae, pool
        self.buckets = batch_buckets(max_batch)
        self.capture = capture
        self.statics: dict[int, _StaticDecode] = {}

    def __call__(self, latents: torch.Tensor, slots: list[int]) -> torch.Tensor | None:
        """Audio `[n, samples]` of `latents [n, D, P]` for the sequences in `slots`, their states
        advanced in the pool; None when this path does not apply (too large a batch, or the graphs
        fell back to eager execution)."""
        if not self.capture:
            return self._run(latents, slots)
        return self.guarded(lambda: self._run(latents, slots))

    def _run(self, latents: torch.Tensor, slots: list[int]) -> torch.Tensor | None:
        n = latents.shape[0]
        batch = next((b for b in self.buckets if b >= n), None)
        if batch is None:
            return None
        static = self.statics.get(batch)
        if static is None or static.generation != self.pool.generation:
            static = _StaticDecode(batch, latents.shape[1:], self.pool)
            self.statics[batch] = static
        if self.capture and (static.graph is None or static.audio is None):
            # on the scratch slot: no real state is touched if this fails
            static.graph, static.audio = self._capture(static)
        static.latents[:n].copy_(latents)
        static.latents[n:].zero_()
        copy_from_host(static.slots, torch.tensor(slots + [self.pool.scratch_slot] * (batch - n)))
        if static.graph is None or static.audio is None:  # capture=False
            return self._decode(static)[:n]
        reference = None
        if not static.checked:
            reference = self.vae.decode_stream(static.latents, self.pool.gather(static.slots))
        static.graph.replay()
        if reference is not None:
            audio, state = reference
            if not torch.allclose(static.audio[:n], audio[:n].float(), rtol=1e-3, atol=1e-3):
                self.disable("the captured VAE decode disagrees with eager execution")
                self.pool.scatter(static.slots, state)  # the states the eager decode gives
                return audio[:n].float()
            static.checked = True
        return static.audio[:n].clone()

    def _decode(self, static: _StaticDecode) -> torch.Tensor:
        audio, state = self.vae.decode_stream(static.latents, self.pool.gather(static.slots))
        self.pool.scatter(static.slots, state)
        return audio.float()

    def _capture(self, static: _StaticDecode) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        graph, audio, _ = self.capture_graph(lambda: self._decode(static))
        return graph, audio
