"""A seeded request gives the same audio whether the engine steps in a thread of this process or in an
engine process of its own, with one data-parallel rank or two (each rank then serves one of the two
requests sent at once)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.settings import Settings

REQUEST = SynthesisRequest(text="The same words, the same seed.", seed=7, max_patches=6)


async def _speak(backend: VoxCPMBackend, copies: int) -> tuple[list[np.ndarray], list[int]]:
    """The copies' audio, and the patches each rank made."""

    async def one() -> np.ndarray:
        return np.concatenate([chunk async for chunk in backend.generate(REQUEST)])

    await backend.start()
    try:
        audio = list(await asyncio.gather(*(one() for _ in range(copies))))
        return audio, [rank.stats.patches if rank.stats else 0 for rank in backend.engine_ranks()]
    finally:
        await backend.stop()


def _audio(engine_process: bool, data_parallel_size: int = 1, copies: int = 1) -> list[np.ndarray]:
    settings = Settings(
        random_weights="tiny",
        device="cpu",
        num_kv_blocks=256,
        torch_threads=1,
        engine_process=engine_process,
        data_parallel_size=data_parallel_size,
    )
    backend = VoxCPMBackend.from_settings(settings)
    audio, patches = asyncio.run(_speak(backend, copies))
    assert patches == [6 * copies // data_parallel_size] * data_parallel_size  # every rank served its share
    return audio


@pytest.mark.process  # polyvox starts the engine processes
def test_a_seeded_request_sounds_the_same_in_thread_and_in_engine_processes():
    (in_thread,) = _audio(engine_process=False)
    assert in_thread.size == 6 * 7680  # six 160 ms patches at 48 kHz
    (one_rank,) = _audio(engine_process=True)
    np.testing.assert_array_equal(one_rank, in_thread)
    for copy in _audio(engine_process=True, data_parallel_size=2, copies=2):
        np.testing.assert_array_equal(copy, in_thread)
