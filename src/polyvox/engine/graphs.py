"""CUDA graphs for the LocDiT CFM solve (the bulk of a step), one per batch bucket and timestep count.

Rows are independent in the solve, so a batch runs in the smallest captured bucket that holds it,
its padding rows ignored. Capture is lazy and optional: if it fails, the solve runs eagerly.
"""

from __future__ import annotations

import logging

import torch

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
