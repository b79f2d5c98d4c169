"""100 concurrent requests through the official `openai` client against `polyvox serve
--random-weights tiny` (the command, as a child process): all complete with valid audio, none lost,
and the engine batched them and gave every KV block back."""

from __future__ import annotations

import asyncio

import numpy as np
import openai

from helpers.audio import decode
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve

PATCH_S = 0.16


def test_a_hundred_concurrent_requests_to_polyvox_serve_random_weights_all_complete(tmp_path):
    flags = (
        "--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "4096",
        "--max-concurrent-requests", "100", "--max-queue", "256", "--no-cache-enabled",
        "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning",
    )  # fmt: skip
    with polyvox_serve(*flags) as (proc, url):

        async def main() -> list[bytes]:
            client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=600)

            async def one(i: int) -> bytes:
                speech = await client.audio.speech.create(
                    model="voxcpm2", voice="alloy", input=f"Request {i}.", response_format="wav",
                    extra_body={"seed": i},
                )  # fmt: skip
                return speech.content

            try:
                return await asyncio.gather(*(one(i) for i in range(100)))
            finally:
                await client.close()

        bodies = asyncio.run(main())
        metrics = scrape(url)
        assert value(metrics, "polyvox_engine_kv_blocks_used", rank="0") == 0
        assert value(metrics, "polyvox_engine_batch_size_mean", rank="0") > 1  # they were batched
        assert proc.poll() is None  # still serving
    assert len(bodies) == 100
    for body in bodies:
        samples, rate = decode(body)
        assert rate == 24000 and samples.size / rate >= 3 * PATCH_S - 0.01  # the stop head waits min_len
        assert np.isfinite(samples).all() and np.abs(samples).max() > 0
