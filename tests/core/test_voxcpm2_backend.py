"""The async engine and `VoxCPMBackend` on the tiny random VoxCPM2: streaming, cancellation, cloning,
input errors, and engine metrics through the real server."""

from __future__ import annotations

import asyncio
import hashlib

import httpx
import numpy as np
import pytest

from helpers.server import running_server
from polyvox.backends.base import Backend, ReferenceAudio, SynthesisRequest
from polyvox.backends.errors import BackendInputError, EmptyInput
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.async_core import AsyncEngineCore
from polyvox.core.config import BatchingConfig
from polyvox.core.sequence import SamplingParams
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

PATCH_SAMPLES = 7680


@pytest.fixture(scope="module")
def model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


async def wait_for(condition, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def tone(seconds: float, rate: int, freq: float = 200.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def reference(seconds: float = 0.8, rate: int = 24000, transcript: str | None = None) -> ReferenceAudio:
    samples = tone(seconds, rate)
    return ReferenceAudio(samples, rate, hashlib.sha256(samples.tobytes()).hexdigest(), transcript)


async def collect(backend: VoxCPMBackend, request: SynthesisRequest) -> list[np.ndarray]:
    return [chunk async for chunk in backend.generate(request)]


def test_async_core_streams_concurrent_requests_and_closing_one_cancels_it(tiny):
    async def main():
        step_loop = AsyncEngineCore(tiny.core(decode_audio=False))
        step_loop.start()
        try:
            long = step_loop.generate(
                tiny.prompt("I am cancelled."), SamplingParams(seed=1, min_len=40, max_len=40)
            )
            first = await anext(long)
            assert first.index == 0
            assert step_loop.stats().kv_blocks_used > 0

            async def run(text, n):
                outs = [
                    o
                    async for o in step_loop.generate(tiny.prompt(text), SamplingParams(min_len=n, max_len=n))
                ]
                return [o.index for o in outs], outs[-1].finished

            results = await asyncio.gather(run("one", 3), run("two two", 5), run("three three", 4))
            assert results == [([0, 1, 2], True), ([0, 1, 2, 3, 4], True), ([0, 1, 2, 3], True)]
            await long.aclose()
            await wait_for(lambda: step_loop.stats().running == 0, "the cancelled request leaves the engine")
            stats = step_loop.stats()
            assert stats.kv_blocks_used == 0 and stats.patches < 3 + 5 + 4 + 40
        finally:
            step_loop.stop()

    asyncio.run(main())


def test_voxcpm2_engine_meets_the_engine_contract_and_streams_160ms_chunks(model):
    async def main():
        backend = VoxCPMBackend(model, BatchingConfig(num_kv_blocks=256))
        assert isinstance(backend, Backend)
        can = backend.info.capabilities
        assert backend.info.sample_rate == 48000
        assert (can.cloning, can.voice_design, can.native_speed) == (True, True, False)
        await backend.start()
        try:
            assert backend.ready
            chunks = await collect(backend, SynthesisRequest("Hello.", voice="nova", seed=3, max_patches=3))
            assert [c.shape for c in chunks] == [(PATCH_SAMPLES,)] * 3
            assert all(c.dtype == np.float32 and np.isfinite(c).all() for c in chunks)
            again = await collect(backend, SynthesisRequest("Hello.", voice="nova", seed=3, max_patches=3))
            assert np.allclose(np.concatenate(chunks), np.concatenate(again), atol=1e-5)
        finally:
            await backend.stop()
        assert not backend.ready

    asyncio.run(main())


def test_voxcpm2_engine_rejects_bad_input(model):
    backend = VoxCPMBackend(model, BatchingConfig(num_kv_blocks=64))
    with pytest.raises(EmptyInput) as err:
        backend.checked(SynthesisRequest("   "))
    assert err.value.param == "input"
    empty = ReferenceAudio(np.zeros(0, np.float32), 16000, "x")
    with pytest.raises(BackendInputError):
        backend.validate(SynthesisRequest("Hi.", reference=empty))
    with pytest.raises(BackendInputError):
        backend.validate(SynthesisRequest("Hi.", temperature=0.0))


def test_cloning_from_a_reference_and_reusing_it_hits_the_prefix_cache(model):
    async def main():
        backend = VoxCPMBackend(model, BatchingConfig(num_kv_blocks=256, kv_block_size=4))
        await backend.start()
        try:
            ref = reference(1.2)
            a = await collect(backend, SynthesisRequest("First clone.", reference=ref, seed=1, max_patches=3))
            hits = backend.stats().prefix_cache_hits
            b = await collect(
                backend, SynthesisRequest("Second clone.", reference=ref, seed=1, max_patches=3)
            )
            assert backend.stats().prefix_cache_hits > hits
            zero_shot = await collect(backend, SynthesisRequest("Second clone.", seed=1, max_patches=3))
            assert len(a) == len(b) == 3
            assert np.abs(np.concatenate(b) - np.concatenate(zero_shot)).max() > 1e-4  # the reference matters
            with_transcript = reference(1.2, transcript="A tone.")
            c = await collect(
                backend, SynthesisRequest("Third.", reference=with_transcript, seed=1, max_patches=2)
            )
            assert [x.shape for x in c] == [(PATCH_SAMPLES,)] * 2
            assert backend.stats().kv_blocks_used == 0
        finally:
            await backend.stop()

    asyncio.run(main())


def _metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(name + '{rank="0"} '))
    return float(line.split()[1])


def test_metrics_show_the_batching_engine_at_work(model):
    backend = VoxCPMBackend(model, BatchingConfig(max_num_seqs=16, num_kv_blocks=512), max_patches=3)
    with running_server(create_app(Settings(), backend)) as url:

        async def main():
            async with httpx.AsyncClient(base_url=url, timeout=600) as client:

                async def speak(i: int) -> int:
                    body = {"input": f"Sentence {i} for the metrics.", "response_format": "pcm"}
                    return (await client.post("/v1/audio/speech", json=body)).status_code

                assert await speak(0) == 200  # the first use of a builtin voice also freezes its prompt
                before = (await client.get("/metrics")).text
                assert await asyncio.gather(*(speak(i) for i in range(1, 7))) == [200] * 6
                return before, (await client.get("/metrics")).text

        before, after = asyncio.run(main())
    patches = _metric(after, "polyvox_engine_patches_total") - _metric(before, "polyvox_engine_patches_total")
    steps = _metric(after, "polyvox_engine_steps_total") - _metric(before, "polyvox_engine_steps_total")
    assert patches == 6 * 3
    assert steps < patches  # the six requests shared steps
    assert _metric(after, "polyvox_engine_kv_blocks_used") == 0
    assert _metric(after, "polyvox_engine_kv_blocks_free") >= 500  # all of the 512-block pool but scratch
    assert _metric(after, "polyvox_engine_running_requests") == 0
    assert "polyvox_engine_prefix_cache_hit_rate" in after and "polyvox_engine_preemptions_total" in after
