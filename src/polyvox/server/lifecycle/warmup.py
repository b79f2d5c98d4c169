"""The `warmup` start-up stage: before `/ready` turns 200, do what the first users would otherwise pay
for. The builtin voices are frozen first (`freeze_voices_at_start`, which `warmup` implies); then one
short request goes through every engine rank, at once and in different voices so each rank gets one
(its first step's allocations, the prompt path, the VAE); on CUDA with `cuda_graphs`, bursts of 1, 2,
4 ... 64 requests per rank then capture the decode graphs of those batch sizes, which are otherwise
captured by the first step that runs at each size. The requests go through the text step as a
speech request's do (`TextPipeline`: pieces checked, then spoken on the back end). Each part is a
logged start-up stage; a request that fails is logged and the server still starts."""

from __future__ import annotations

import asyncio
import logging
import uuid

import anyio

from polyvox.backends.base import OPENAI_VOICES, Backend, SynthesisRequest
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.runtime.startup import stage
from polyvox.settings import Settings
from polyvox.voices.errors import VoiceNotFound
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)

WARMUP_TEXT = "Warming up."
# Batch sizes warmed per rank on CUDA: those the graphs' buckets start with (graphs.batch_buckets),
# up to the batch the engine takes; larger buckets are captured when traffic first reaches them.
GRAPH_BATCHES = (1, 2, 4, 8, 16, 32, 64)


async def warm_up(backend: Backend, text: TextPipeline, voices: VoiceRegistry, settings: Settings) -> int:
    """Run the warm-up requests; the number that failed (logged)."""
    batching = bool(backend.engine_ranks())
    ranks = max(1, len(backend.engine_ranks()))
    with stage(f"warm-up: one request through each of {ranks} engine rank(s)"):
        failed = await _burst(backend, text, voices, ranks)
    if batching and settings.cuda_graphs and _on_cuda(settings):
        for size in (b for b in GRAPH_BATCHES if b <= settings.max_num_seqs):
            with stage(f"warm-up: CUDA graphs at batch {size} ({size * ranks} requests at once)"):
                failed += await _burst(backend, text, voices, size * ranks)
    return failed


def _on_cuda(settings: Settings) -> bool:
    from polyvox.models.checkpoint import device_name  # the CPU by name; auto and CUDA ask PyTorch

    devices = settings.devices or [settings.device]
    return device_name(devices[0]).startswith("cuda")


async def _burst(backend: Backend, text: TextPipeline, voices: VoiceRegistry, count: int) -> int:
    """`count` requests at once, each in the next builtin voice (the router sends a voice where it went
    last; different voices spread over the ranks by load); how many failed."""
    names = [OPENAI_VOICES[n % len(OPENAI_VOICES)] for n in range(count)]
    results = await asyncio.gather(*(_one(backend, text, voices, name, n) for n, name in enumerate(names)))
    return results.count(False)


async def _one(backend: Backend, text: TextPipeline, voices: VoiceRegistry, name: str, seed: int) -> bool:
    """One short request in voice `name`, its audio read to the end; whether it succeeded."""
    try:
        try:
            reference = (await voices.resolve(name, backend)).reference
        except VoiceNotFound:
            reference = None
        request = SynthesisRequest(
            text=WARMUP_TEXT, voice=name, reference=reference, seed=seed, request_id=uuid.uuid4().hex
        )
        request = await anyio.to_thread.run_sync(text.checked, backend, request)
        stream = text.generate(backend, request)
        try:
            async for _ in stream:
                pass
        finally:
            await stream.aclose()
        return True
    except Exception as exc:  # any back-end failure: the server starts anyway, this part stays cold
        log.warning("warm-up request in voice %s failed: %s: %s", name, type(exc).__name__, exc)
        return False
