"""A request without a seed has one fixed once, as the server prepares it: an answer the engine lost
before any of it reached the client is run again with that very seed (the same answer as a client that
asked for that seed gets), and the audio cache keys on the client's seed, none, so the next unseeded
request is a HIT. The engine here is the losing tone engine made louder or softer by its request's seed,
so that two seeds give two answers."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx
import numpy as np

from helpers.losing_engine import LosingEngine
from polyvox.backends.base import SynthesisRequest

TEXT = "Lost, and found again the same."


class SeededTone(LosingEngine):
    """`LosingEngine` whose tone's loudness is its request's seed's; it keeps the seeds it was asked."""

    def __init__(self, losses: int, **fake: Any) -> None:
        super().__init__(losses, chunk_s=0.005, **fake)
        self.seeds: list[int | None] = []

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        self.seeds.append(request.seed)
        assert request.seed is not None  # the server sends every request's seed
        gain = np.float32(0.2 + (request.seed % 97) / 200)
        async for chunk in super().generate(request):
            yield chunk * gain


def speak(url: str, **fields: Any) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": "wav", "stream": False}
    answer = httpx.post(f"{url}/v1/audio/speech", json=body | fields, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def test_an_unseeded_answer_run_again_keeps_its_seed_and_is_cached_as_unseeded(serve, tmp_path) -> None:
    engine = SeededTone(losses=1)
    url = serve(engine, cache_enabled=True, cache_dir=tmp_path / "cache")
    served = speak(url)
    assert served.headers["X-Cache"] == "MISS"
    assert engine.runs == 2 and len(set(engine.seeds)) == 1  # run again with the seed of its first run
    seed = engine.seeds[0]

    asked = speak(serve(SeededTone(losses=0)), seed=seed)  # a client that asked for that seed
    assert asked.content == served.content

    again = speak(url)  # no seed again: the cached answer, the engine not asked
    assert again.headers["X-Cache"] == "HIT" and engine.runs == 2
    assert again.content == served.content
