"""A failed engine step fails only the requests it was running; requests waiting their turn, and the
ones after, are served, and every KV block comes back."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from helpers.server import running_server
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings


@pytest.fixture(scope="module")
def model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


def test_a_failed_step_fails_its_batch_and_the_waiting_requests_are_served(model):
    backend = VoxCPMBackend(model, BatchingConfig(max_num_seqs=2, num_kv_blocks=512), max_patches=6)
    with running_server(create_app(Settings(max_concurrent_requests=8), backend)) as url:
        runner = backend._step_loop.core.runner
        real_run = runner.run
        failed_batch: list[set[str]] = []

        def faulty_run(chunks):
            generating = [c for c in chunks if c.seq.patches]
            if not failed_batch and len(generating) == 2:  # both batch rows are mid-generation
                failed_batch.append({c.seq.request_id for c in chunks})
                raise RuntimeError("injected device fault")
            return real_run(chunks)

        runner.run = faulty_run

        bodies = [  # whole files: a failure mid-generation is then a 500, not a stream cut short
            {"input": f"Request {i} of four.", "response_format": "pcm", "seed": i, "stream": False}
            for i in range(4)
        ]

        async def main():
            async with httpx.AsyncClient(base_url=url, timeout=120) as client:
                return await asyncio.gather(*(client.post("/v1/audio/speech", json=b) for b in bodies))

        answers = asyncio.run(main())
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200, 200, 500, 500]  # the two in the failed step; the two waiting are served
        for body, answer in zip(bodies, answers, strict=True):
            if answer.status_code == 200:  # served whole: the same audio as the same request made alone
                alone = httpx.post(f"{url}/v1/audio/speech", json={**body, "cache": False}, timeout=120)
                assert len(answer.content) == len(alone.content) > 0
                served = np.frombuffer(answer.content, np.int16).astype(np.int32)
                assert np.abs(served - np.frombuffer(alone.content, np.int16)).max() <= 2
        assert all(a.json()["error"]["type"] == "server_error" for a in answers if a.status_code == 500)
        assert len(failed_batch[0]) == 2
        assert httpx.get(f"{url}/ready").status_code == 200
        assert backend.stats().kv_blocks_used == 0 and backend.stats().running == 0
