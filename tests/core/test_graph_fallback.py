"""The one fallback policy of the step's CUDA graphs (`batching.cuda_graph.GraphSet`): when a graph
cannot be captured, that set says so once and runs eagerly from then on, and the audio is what the
eager path gives. On a machine without CUDA every capture fails, which is how this runs on a CPU."""

from __future__ import annotations

import logging

import numpy as np
import torch

from polyvox.core.graphs import AdvanceGraphs, DiTGraphs
from polyvox.core.sequence import SamplingParams
from polyvox.core.vae_graphs import VAEDecodeGraphs

PARTS = ("the LocDiT solve", "the LM advance", "the VAE decode")


def test_graph_sets_that_cannot_capture_fall_back_to_eager_once_and_give_the_same_audio(tiny, caplog):
    prompts = [tiny.prompt("Hello there, friend."), tiny.prompt("A second voice.")]
    params = [SamplingParams(seed=1, min_len=5, max_len=5), SamplingParams(seed=2, min_len=3, max_len=3)]
    eager = tiny.core(max_graph_batch=8).generate(prompts, params)

    core = tiny.core(max_graph_batch=8)
    runner = core.runner
    runner.graphs = DiTGraphs(tiny.lm, 8)
    runner.advance_graphs = AdvanceGraphs(
        tiny.lm, runner.base_kv, runner.res_kv, runner.block_size, runner.num_kv_blocks, 8, capture=True
    )
    runner.vae_graphs = VAEDecodeGraphs(tiny.vae, runner.vae_pool, 8, capture=True)
    with caplog.at_level(logging.WARNING, logger="polyvox.core.cuda_graph"):
        got = core.generate(prompts, params)

    assert runner.graphs.disabled and runner.advance_graphs.disabled and runner.vae_graphs.disabled
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for part in PARTS:  # one warning per set, however many steps ran after it
        assert sum(m.startswith(f"CUDA graph for {part} failed") for m in warnings) == 1, warnings
    for (got_latents, got_audio), (want_latents, want_audio) in zip(got, eager, strict=True):
        torch.testing.assert_close(got_latents, want_latents, atol=1e-5, rtol=0)
        assert got_audio.size == want_audio.size > 0
        assert np.abs(got_audio - want_audio).max() <= 1e-5
    assert core.block_manager.num_free == core.block_manager.num_blocks
    assert runner.vae_pool.in_use == 0
