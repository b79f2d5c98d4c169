"""`torch.compile` of LocEnc, the LocDiT estimator and the streaming VAE decode (the `compile`
engine setting): compiled at start so requests never wait for the compiler, the same outputs as
eager in a mixed batch, and put back to eager when switched off."""

from __future__ import annotations

import pytest
import torch

from polyvox.core.compile import COMPILED_METHODS


@pytest.fixture(scope="module")
def tiny(tiny_with):
    """The engine tests' tiny model with a two-block VAE decoder (the same 1,920 samples a latent
    frame as the six blocks, and the same code): a cold compile of the VAE was most of this test's
    minutes on two cores, and its cost grows with the blocks, whose kernels all differ in size."""
    return tiny_with(vae={"decoder_rates": [48, 40]})


@pytest.mark.process  # torch.compile builds its kernels with g++ subprocesses (minutes on two cores)
@pytest.mark.timeout(600)  # a cold compile takes about a minute on two cores
def test_a_compiled_engine_gives_the_eager_outputs_and_can_be_switched_back(tiny, mixed, monkeypatch):
    # imported here, not at collection: torch._dynamo is 1.5 s of every worker's CPU otherwise
    from torch._dynamo.utils import counters
    from torch._inductor import config as inductor

    # Inductor's C++ kernels without SIMD (no vector width is 1 bit wide): the same graphs, fusions and
    # shapes are compiled, in scalar loops g++ builds in about three quarters of the CPU (86 -> 60-63 s
    # from an empty compile cache, as every CI machine has). A GPU's kernels are Triton's, untouched.
    monkeypatch.setattr(inductor.cpp, "simdlen", 1)
    # ... and each graph's kernels and the code that calls them built as one C++ file (inductor's C++
    # wrapper) rather than a file per kernel and a Python caller: g++ runs 13 times instead of 75 (63-66
    # -> 41-42 s of CPU from an empty cache, BENCHMARKS.md). The graphs, their shapes and guards (what
    # this test counts) are the same.
    monkeypatch.setattr(inductor, "cpp_wrapper", True)

    requests, alone = mixed
    core = tiny.core(max_num_batched_tokens=64, compile=True)
    assert core.runner.compiled
    compiled = [(tiny.lm.get_submodule(name), method) for name, method in COMPILED_METHODS]
    assert all(method in vars(m) for m, method in compiled) and "decode_stream" in vars(tiny.vae)
    graphs_at_start = counters["stats"]["unique_graphs"]
    got = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    assert counters["stats"]["unique_graphs"] == graphs_at_start  # every shape was compiled at start
    for (latents, audio), (want_latents, want_audio) in zip(got, alone, strict=True):
        assert torch.allclose(latents, want_latents, atol=1e-4, rtol=0)
        assert abs(audio - want_audio).max() <= 1e-4

    eager = tiny.core(compile=False)  # the same model object, another engine: eager again
    assert not eager.runner.compiled and not any(method in vars(m) for m, method in compiled)
    assert "decode_stream" not in vars(tiny.vae)
    p, sp = requests[0]
    assert torch.equal(eager.generate([p], [sp])[0][0], alone[0][0])
