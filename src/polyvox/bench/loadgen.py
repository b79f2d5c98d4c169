"""An async HTTP load generator for `POST /v1/audio/speech` and the figures BENCHMARKING.md asks for:
throughput in audio-seconds per wall-second, time to first audio, latency, RTF and, for streamed
answers, the share of streams a real-time listener could have played without a gap.

Each figure is what the client saw, from sending the request: time to first audio (`ttfa`) is the
first body bytes, latency the last, RTF is latency / audio seconds (the whole answer's real-time
factor: below 1 it arrived faster than it plays). Requests are sent in one of three modes: as an
OpenAI client sends them (`default`, which polyvox streams), with `stream_format: "audio"`
(`stream`), or with `stream: false` for one whole file (`whole`, where first audio is the latency).
"""

from __future__ import annotations

import asyncio
import io
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import numpy as np

DEFAULT_INPUT = (
    "The quick brown fox jumps over the lazy dog. Then it runs across the field, past the old barn, "
    "and into the forest, where the birds are singing in the tall green trees."
)

# default: the request as an OpenAI client sends it; stream: stream_format "audio"; whole: stream false.
Mode = Literal["default", "stream", "whole"]
MODE_FIELDS: dict[str, dict[str, Any]] = {
    "default": {},
    "stream": {"stream_format": "audio"},
    "whole": {"stream": False},
}


@dataclass
class BenchConfig:
    url: str
    concurrency: int
    requests: int
    mode: Mode = "default"
    response_format: str = "pcm"
    input: str = DEFAULT_INPUT
    voice: str = "alloy"
    model: str = "tts-1"
    sample_rate: int = 24000
    timeout_s: float = 600.0
    use_cache: bool = False  # off: every request is synthesised (Cache-Control: no-store), not replayed
    seed: int | None = None  # one sampling seed for every request: the same audio, so the same length


@dataclass
class Sample:
    """One request as the client saw it: chunk arrival times (from send) and sizes."""

    status: int = 0
    error: str | None = None
    arrivals: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    body: bytes = b""
    audio_s: float = 0.0

    @property
    def ttfa_s(self) -> float:
        return self.arrivals[0]

    @property
    def latency_s(self) -> float:
        return self.arrivals[-1]


def audio_seconds(body: bytes, response_format: str, pcm_rate: int) -> float:
    """Duration of a response body: from its length for pcm, by decoding it with PyAV otherwise."""
    if response_format == "pcm":
        return len(body) / 2 / pcm_rate
    import av

    with av.open(io.BytesIO(body), "r") as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.codec_context.sample_rate


def viable(sample: Sample) -> bool:
    """Whether every chunk arrived before a listener who started at the first chunk needed it.

    A chunk's audio position is its byte offset's share of the whole duration (exact for pcm and
    wav, proportional for compressed formats)."""
    total = sum(sample.sizes)
    if total == 0 or sample.audio_s <= 0:
        return False
    start = sample.arrivals[0]
    offset = 0
    for arrived, size in zip(sample.arrivals, sample.sizes, strict=True):
        if arrived - start > sample.audio_s * offset / total:
            return False
        offset += size
    return True


async def _one(client: httpx.AsyncClient, config: BenchConfig) -> Sample:
    payload: dict[str, Any] = {
        "model": config.model,
        "input": config.input,
        "voice": config.voice,
        "response_format": config.response_format,
    }
    payload |= MODE_FIELDS[config.mode]
    if config.seed is not None:
        payload["seed"] = config.seed
    sample = Sample()
    parts: list[bytes] = []
    sent = time.perf_counter()
    try:
        async with client.stream(
            "POST",
            f"{config.url.rstrip('/')}/v1/audio/speech",
            json=payload,
            headers=None if config.use_cache else {"Cache-Control": "no-store"},
        ) as response:
            sample.status = response.status_code
            if response.status_code != 200:
                await response.aread()
                sample.error = f"HTTP {response.status_code}: {response.text[:200]}"
                return sample
            async for chunk in response.aiter_raw():
                if chunk:
                    sample.arrivals.append(time.perf_counter() - sent)
                    sample.sizes.append(len(chunk))
                    parts.append(chunk)
    except httpx.HTTPError as exc:
        sample.error = f"{type(exc).__name__}: {exc}"
        return sample
    sample.body = b"".join(parts)
    if not sample.body:
        sample.error = "empty response"
    return sample


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(samples: list[Sample], wall_s: float, config: BenchConfig) -> dict[str, Any]:
    """The report: one flat dict, the fields `polyvox bench --json` prints."""
    ok = [s for s in samples if s.error is None]
    audio_total = sum(s.audio_s for s in ok)
    rtfs = [s.latency_s / s.audio_s for s in ok if s.audio_s > 0]
    streamed = config.mode != "whole"
    errors = [s.error for s in samples if s.error is not None]
    return {
        "throughput_audio_s_per_s": audio_total / wall_s if wall_s > 0 else 0.0,
        "ttfa_p50_s": _percentile([s.ttfa_s for s in ok], 50),
        "ttfa_p95_s": _percentile([s.ttfa_s for s in ok], 95),
        "latency_p50_s": _percentile([s.latency_s for s in ok], 50),
        "latency_p95_s": _percentile([s.latency_s for s in ok], 95),
        "rtf_p50": _percentile(rtfs, 50),
        "rtf_p95": _percentile(rtfs, 95),
        "requests": len(samples),
        "errors": len(errors),
        "streaming_viability": (sum(viable(s) for s in ok) / len(ok) if ok else 0.0) if streamed else None,
        "audio_s_total": audio_total,
        "audio_s_mean": audio_total / len(ok) if ok else 0.0,
        "wall_s": wall_s,
        "concurrency": config.concurrency,
        "mode": config.mode,
        "stream": streamed,
        "response_format": config.response_format,
        "input_chars": len(config.input),
        "error_samples": errors[:5],
    }


async def run_load(config: BenchConfig) -> dict[str, Any]:
    """Send `config.requests` requests, `config.concurrency` at a time, and summarise them."""
    limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
    timeout = httpx.Timeout(config.timeout_s, connect=30.0)
    remaining = iter(range(config.requests))
    samples: list[Sample] = []

    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:

        async def worker() -> None:
            for _ in remaining:
                samples.append(await _one(client, config))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(config.concurrency, config.requests))))
        wall_s = time.perf_counter() - started

    # Decode after the run, so decoding never delays the timing of requests still in flight.
    for sample in samples:
        if sample.error is None:
            try:
                sample.audio_s = audio_seconds(sample.body, config.response_format, config.sample_rate)
            except Exception as exc:  # undecodable audio is an error of the server under test
                sample.error = f"undecodable audio: {exc}"
        sample.body = b""
    return summarize(samples, wall_s, config)


def format_report(report: dict[str, Any]) -> str:
    """A human-readable report."""

    def sec(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f} s"

    def ratio(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    answer = {"default": "default request", "stream": "stream_format=audio", "whole": "stream=false"}
    mode = f"{report['response_format']}, {answer[report['mode']]}"
    lines = [
        f"requests        {report['requests']} ({report['errors']} errors), {mode}, "
        f"concurrency {report['concurrency']}",
        f"throughput      {report['throughput_audio_s_per_s']:.2f} audio-s/s "
        f"({report['audio_s_total']:.1f} audio-s in {report['wall_s']:.1f} s)",
        f"first audio     p50 {sec(report['ttfa_p50_s'])}   p95 {sec(report['ttfa_p95_s'])}",
        f"latency         p50 {sec(report['latency_p50_s'])}   p95 {sec(report['latency_p95_s'])}",
        f"rtf             p50 {ratio(report['rtf_p50'])}   p95 {ratio(report['rtf_p95'])}   "
        "(latency / audio seconds)",
    ]
    if report["streaming_viability"] is not None:
        lines.append(f"viable streams  {100 * report['streaming_viability']:.0f}%")
    lines += [f"error           {message}" for message in report["error_samples"]]
    return "\n".join(lines)
