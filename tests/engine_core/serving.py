"""What the engine-process tests share: a `polyvox serve` with two engine ranks on the CPU, long requests
that stay in flight for seconds, and reading the per-rank engine metrics."""

from __future__ import annotations

import time

import httpx

from helpers.metrics import value

SPEECH = "/v1/audio/speech"
FLAGS = (
    "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "1024",
    "--data-parallel-size", "2", "--log-level", "warning", "--max-piece-chars", "40",
)  # fmt: skip
# Many sentences: many pieces, each generated in turn, so the request stays in flight for seconds.
LONG = " ".join(f"Sentence number {n} goes on for a little while." for n in range(1, 16))


def speak(url: str, text: str, voice: str = "alloy", **extra) -> httpx.Response:
    body = {"input": text, "voice": voice, "response_format": "pcm", **extra}
    return httpx.post(f"{url}{SPEECH}", json=body, timeout=300)


def per_rank(samples: dict, name: str) -> list[float]:
    return [value(samples, name, rank=str(rank)) for rank in range(2)]


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)
