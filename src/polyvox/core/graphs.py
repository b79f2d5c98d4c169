"""CUDA graphs for a decode step: the LocDiT CFM solve (one graph per batch bucket and timestep count)
and the LMs' one-token advance (one per batch bucket and block-table width bucket).

Rows are independent, so a batch runs in the smallest captured bucket that holds it, its padding
rows ignored; the advance's padding rows write their K/V into a scratch block no sequence owns, and
its attention runs over the bucket's full table width with the real context lengths masking the rest.
Capture is lazy; a failure falls back to eager execution (`cuda_graph.GraphSet`'s one policy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from polyvox.core.block_tables import BlockTableArray
from polyvox.core.cuda_graph import GraphMismatch, GraphSet
from polyvox.models.interface import AttentionMetadata, PagedKVCache, SpeechLM, copy_from_host

# The LocDiT solve's tensor inputs: LM hidden, residual hidden, previous patch, noise, CFG value.
SolveInputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def batch_buckets(max_batch: int) -> list[int]:
    buckets = [1, 2, 4, 8]
    while buckets[-1] < max_batch:
        buckets.append(buckets[-1] + (8 if buckets[-1] < 32 else 16 if buckets[-1] < 128 else 32))
    return buckets


class _Graph:
    def __init__(self, graphs: GraphSet, lm: SpeechLM, inputs: SolveInputs, steps: int) -> None:
        self.inputs = inputs
        self.graph, self.output, _ = graphs.capture_graph(lambda: lm.decode_patch(*inputs, steps))

    def __call__(self, args: SolveInputs) -> torch.Tensor:
        n = args[0].shape[0]
        for static, value in zip(self.inputs, args, strict=True):
            static[:n].copy_(value)
        self.graph.replay()
        return self.output[:n].clone()


class DiTGraphs(GraphSet):
    def __init__(self, lm: SpeechLM, max_batch: int) -> None:
        super().__init__("the LocDiT solve")
        self.lm = lm
        self.buckets = batch_buckets(max_batch)
        self.graphs: dict[tuple[int, int], _Graph] = {}

    def decode_patch(
        self,
        lm_hidden: torch.Tensor,
        res_hidden: torch.Tensor,
        prev: torch.Tensor,
        noise: torch.Tensor,
        cfg: torch.Tensor,
        steps: int,
    ) -> torch.Tensor:
        args = (lm_hidden, res_hidden, prev, noise, cfg)
        out = self.guarded(lambda: self._replay(args, steps))
        return out if out is not None else self.lm.decode_patch(*args, steps)

    def _replay(self, args: SolveInputs, steps: int) -> torch.Tensor | None:
        """The solve through the bucket's graph (captured on first use); None past the largest bucket."""
        n = args[0].shape[0]
        bucket = next((b for b in self.buckets if b >= n), None)
        if bucket is None:
            return None
        graph = self.graphs.get((bucket, steps))
        if graph is None:
            graph = self._capture(bucket, steps, args)
        return graph(args)

    def _capture(self, bucket: int, steps: int, like: SolveInputs) -> _Graph:
        lm_hidden, res_hidden, prev, noise, cfg = (
            torch.zeros((bucket, *t.shape[1:]), dtype=t.dtype, device=t.device) for t in like
        )
        inputs = (lm_hidden, res_hidden, prev, noise, cfg)
        inputs[0].normal_()
        inputs[1].normal_()
        inputs[3].normal_()
        inputs[4].fill_(2.0)
        graph = _Graph(self, self.lm, inputs, steps)
        self.graphs[(bucket, steps)] = graph
        return graph


def width_bucket(blocks: int) -> int:
    width = 4
    while width < blocks:
        width *= 2
    return width


class _StaticAdvance:
    """Fixed-shape inputs of `advance` for `batch` rows and block tables `width` wide."""

    def __init__(
        self,
        batch: int,
        width: int,
        block_size: int,
        patch_shape: torch.Size,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        long: dict[str, Any] = dict(dtype=torch.long, device=device)
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


class AdvanceGraphs(GraphSet):
    """`advance` over fixed-shape metadata; `capture=False` runs that same padded path eagerly.

    Called, it gives the advance's hidden states, or None where the caller runs `advance` itself
    (too large a batch, or the graphs fell back to eager execution)."""

    def __init__(
        self,
        lm: SpeechLM,
        base_kv: PagedKVCache,
        res_kv: PagedKVCache,
        block_size: int,
        scratch_block: int,
        max_batch: int,
        capture: bool,
    ) -> None:
        super().__init__("the LM advance")
        self.lm, self.base_kv, self.res_kv = lm, base_kv, res_kv
        self.block_size = block_size
        self.scratch_block = scratch_block
        self.buckets = batch_buckets(max_batch)
        self.capture = capture
        self.statics: dict[tuple[int, int], _StaticAdvance] = {}
        self.tables = BlockTableArray(pad=scratch_block)  # the rows' block tables, kept across steps

    def __call__(
        self, patches: torch.Tensor, positions: np.ndarray, tables: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`positions`: each row's fed position; `tables`: each row's block table."""
        if not self.capture:
            return self._run(patches, positions, tables)
        return self.guarded(lambda: self._run(patches, positions, tables))

    def _run(
        self, patches: torch.Tensor, positions: np.ndarray, tables: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        n = patches.shape[0]
        batch = next((b for b in self.buckets if b >= n), None)
        if batch is None:
            return None
        bs = self.block_size
        pos = positions
        width = width_bucket(int(pos.max()) // bs + 1)
        key = (batch, width)
        static = self.statics.get(key)
        if static is None:
            static = _StaticAdvance(batch, width, bs, patches.shape[1:], patches.dtype, patches.device)
            self.statics[key] = static
        # rows past n, and each table's tail, point at the scratch block: built with numpy, not per row
        scratch = self.scratch_block
        table_array, _ = self.tables.update(tables)
        host = np.empty(3 * batch + batch * width, dtype=np.int64)
        positions_h, slots_h, context_h = host[:batch], host[batch : 2 * batch], host[2 * batch : 3 * batch]
        rows = host[3 * batch :].reshape(batch, width)
        rows[n:] = scratch
        rows[:n, : table_array.shape[1]] = table_array
        rows[:n, table_array.shape[1] :] = scratch
        positions_h[:n], positions_h[n:] = pos, 0
        slots_h[:n] = rows[np.arange(n), pos // bs] * bs + pos % bs
        slots_h[n:] = scratch * bs
        context_h[:n], context_h[n:] = pos + 1, 1
        packed = torch.from_numpy(host)
        if patches.device.type == "cuda":
            packed = packed.pin_memory()  # once for the four copies below
        meta = static.meta
        copy_from_host(meta.positions, packed[:batch])
        copy_from_host(meta.slot_mapping, packed[batch : 2 * batch])
        copy_from_host(meta.context_lens, packed[2 * batch : 3 * batch])
        copy_from_host(meta.block_tables, packed[3 * batch :].view(batch, width))
        static.patch[:n].copy_(patches)
        if not self.capture:
            out = self.lm.advance(static.patch, meta, self.base_kv, self.res_kv)
            return out[0][:n], out[1][:n]
        if static.graph is None or static.output is None:
            static.graph, static.output = self._capture(static)
        static.graph.replay()
        return static.output[0][:n].clone(), static.output[1][:n].clone()

    def _capture(
        self, static: _StaticAdvance
    ) -> tuple[torch.cuda.CUDAGraph, tuple[torch.Tensor, torch.Tensor]]:
        # warm-up runs compute this step's real K/V into the real slots; replaying writes the same values
        graph, output, eager = self.capture_graph(
            lambda: self.lm.advance(static.patch, static.meta, self.base_kv, self.res_kv)
        )
        # Guard: a replay must reproduce the eager result on these same inputs, or the graph is not used.
        graph.replay()
        for replayed, reference in zip(output, eager, strict=True):
            if not torch.allclose(replayed.float(), reference.float(), rtol=1e-2, atol=1e-2):
                raise GraphMismatch("the captured LM advance disagrees with eager execution")
        return graph, output
