"""CUDA graphs for a decode step: the LocDiT CFM solve (one graph per batch bucket and timestep count)
and the LMs' one-token advance (one per batch bucket and block-table width bucket).

Rows are independent, so a batch runs in the smallest captured bucket that holds it, its padding
rows ignored; the advance's padding rows write their K/V into a scratch block no sequence owns, and
its attention runs over the bucket's full table width with the real context lengths masking the rest.
Capture is lazy and optional: if it fails, that part runs eagerly.
"""

from __future__ import annotations

import logging

import torch

from polyvox.models.voxcpm2.attention import AttentionMetadata
from polyvox.models.voxcpm2.host_to_device import copy_from_host

log = logging.getLogger(__name__)


def batch_buckets(max_batch: int) -> list[int]:
    buckets = [1, 2, 4, 8]
    while buckets[-1] < max_batch:
        buckets.append(buckets[-1] + (8 if buckets[-1] < 32 else 16 if buckets[-1] < 128 else 32))
    return buckets


class _Graph:
    def __init__(self, lm, inputs: tuple[torch.Tensor, ...], steps: int, pool):
        self.inputs = inputs
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                lm.decode_patch(*inputs, steps)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.output = lm.decode_patch(*inputs, steps)

    def __call__(self, args: tuple[torch.Tensor, ...]) -> torch.Tensor:
        n = args[0].shape[0]
        for static, value in zip(self.inputs, args, strict=True):
            static[:n].copy_(value)
        self.graph.replay()
        return self.output[:n].clone()


class DiTGraphs:
    def __init__(self, lm, max_batch: int):
        self.lm = lm
        self.buckets = batch_buckets(max_batch)
        self.graphs: dict[tuple[int, int], _Graph] = {}
        self.pool = None
        self.disabled = False

    def decode_patch(self, lm_hidden, res_hidden, prev, noise, cfg, steps: int) -> torch.Tensor:
        args = (lm_hidden, res_hidden, prev, noise, cfg)
        n = lm_hidden.shape[0]
        bucket = next((b for b in self.buckets if b >= n), None)
        if self.disabled or bucket is None:
            return self.lm.decode_patch(*args, steps)
        graph = self.graphs.get((bucket, steps))
        if graph is None:
            try:
                graph = self._capture(bucket, steps, args)
            except Exception as exc:  # any capture failure: serve eagerly rather than not at all
                log.warning("CUDA graph capture failed (%s); the LocDiT solve runs eagerly", exc)
                self.disabled = True
                return self.lm.decode_patch(*args, steps)
        return graph(args)

    def _capture(self, bucket: int, steps: int, like: tuple[torch.Tensor, ...]) -> _Graph:
        inputs = tuple(torch.zeros((bucket, *t.shape[1:]), dtype=t.dtype, device=t.device) for t in like)
        inputs[0].normal_()
        inputs[1].normal_()
        inputs[3].normal_()
        inputs[4].fill_(2.0)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = _Graph(self.lm, inputs, steps, self.pool)
        self.graphs[(bucket, steps)] = graph
        return graph


def width_bucket(blocks: int) -> int:
    width = 4
    while width < blocks:
        width *= 2
    return width


class _StaticAdvance:
    """Fixed-shape inputs of `advance` for `batch` rows and block tables `width` wide."""

    def __init__(self, batch: int, width: int, block_size: int, patch_shape, dtype, device):
        long = dict(dtype=torch.long, device=device)
        self.patch = torch.zeros((batch, *patch_shape), dtype=dtype, device=device)
        self.meta = AttentionMetadata(
            positions=torch.zeros(batch, **long),
            slot_mapping=torch.zeros(batch, **long),
            query_start_loc=torch.arange(batch + 1, **long),
            context_lens=torch.ones(batch, **long),
            block_tables=torch.zeros((batch, width), **long),
            max_query_len=1,
            max_context_len=width * block_size,
        )
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output: tuple[torch.Tensor, torch.Tensor] | None = None


class AdvanceGraphs:
    """`advance` over fixed-shape metadata; `capture=False` runs that same padded path eagerly."""

    def __init__(
        self, lm, base_kv, res_kv, block_size: int, scratch_block: int, max_batch: int, capture: bool
    ):
        self.lm, self.base_kv, self.res_kv = lm, base_kv, res_kv
        self.block_size = block_size
        self.scratch_block = scratch_block
        self.buckets = batch_buckets(max_batch)
        self.capture = capture
        self.statics: dict[tuple[int, int], _StaticAdvance] = {}
        self.pool = None

    def __call__(self, patches: torch.Tensor, positions: list[int], tables: list[list[int]]):
        n = patches.shape[0]
        batch = next((b for b in self.buckets if b >= n), None)
        if batch is None:
            return None
        bs = self.block_size
        width = width_bucket(max(p // bs + 1 for p in positions))
        key = (batch, width)
        static = self.statics.get(key)
        if static is None:
            static = _StaticAdvance(batch, width, bs, patches.shape[1:], patches.dtype, patches.device)
            self.statics[key] = static
        pad = batch - n
        scratch = self.scratch_block
        rows = [t + [scratch] * (width - len(t)) for t in tables] + [[scratch] * width] * pad
        host = torch.tensor(
            [
                positions + [0] * pad,
                [t[p // bs] * bs + p % bs for t, p in zip(tables, positions, strict=True)]
                + [scratch * bs] * pad,
                [p + 1 for p in positions] + [1] * pad,
            ]
        )
        meta = static.meta
        copy_from_host(meta.positions, host[0])
        copy_from_host(meta.slot_mapping, host[1])
        copy_from_host(meta.context_lens, host[2])
        copy_from_host(meta.block_tables, torch.tensor(rows))
        static.patch[:n].copy_(patches)
        if not self.capture:
            out = self.lm.advance(static.patch, meta, self.base_kv, self.res_kv)
            return out[0][:n], out[1][:n]
        if static.graph is None:
            self._capture(static)
        static.graph.replay()
        return static.output[0][:n].clone(), static.output[1][:n].clone()

    def _capture(self, static: _StaticAdvance) -> None:
        # warm-up runs compute this step's real K/V into the real slots; replaying writes the same values
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                eager = self.lm.advance(static.patch, static.meta, self.base_kv, self.res_kv)
        torch.cuda.current_stream().wait_stream(stream)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            static.output = self.lm.advance(static.patch, static.meta, self.base_kv, self.res_kv)
        # Guard: a replay must reproduce the eager result on these same inputs, or the graph is not used.
        graph.replay()
        for replayed, reference in zip(static.output, eager, strict=True):
            if not torch.allclose(replayed.float(), reference.float(), rtol=1e-2, atol=1e-2):
                raise RuntimeError("the captured LM advance disagrees with eager execution")
        static.graph = graph
