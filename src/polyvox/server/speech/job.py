"""`SpeechJob`: one speech request ready to run (the engine request, how its audio is delivered, its
cache status, its word timings when asked) and the usage it is billed: characters spoken in, 20 ms
audio frames out."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from polyvox.alignment.timeline import Timeline
from polyvox.audio import formats
from polyvox.backends.base import SynthesisRequest
from polyvox.cache import CachedAudio
from polyvox.server.protocol import SpeechUsage

# Usage accounting for SSE `speech.audio.done`: input tokens are the characters spoken, as the text
# front end prepared them (engines do not share a tokenizer), the same whether the audio came from the
# engine or the cache; without a front end, characters of input. Output tokens are 20 ms audio
# frames, i.e. 50 per second of audio.
OUTPUT_TOKENS_PER_SECOND = 50


@dataclass
class SpeechJob:
    """One speech request, ready to run: the engine request and how its audio is to be delivered."""

    request: SynthesisRequest
    fmt: formats.AudioFormat
    out_rate: int
    pipeline_speed: float
    stream: bool
    received_at: float = field(default_factory=time.perf_counter)
    # semitones, shifted by the OutputPipeline: after the cache, whose audio serves every pitch
    pitch: float = 0.0
    audio_seconds: float = 0.0
    cache_status: str = "DISABLED"  # X-Cache: HIT, MISS, BYPASS, ADHOC, DISABLED or MISS-STORE-FAILED
    cache_key: str | None = None
    cached: CachedAudio | None = None
    admitted: bool = False
    # `timestamp_granularities` as asked ("word", "segment"); the pieces timed go to `timeline`
    granularities: tuple[str, ...] = ()

    @property
    def timeline(self) -> Timeline | None:
        """The answer's pieces with their words as they are timed (on the answer's clock, after speed);
        None when no timestamps were asked."""
        return self.request.timeline

    @property
    def route(self) -> str:
        """X-Route: CACHE (served from the cache), ADHOC (one-off clone) or HOT (the engine)."""
        if self.cached is not None:
            return "CACHE"
        return "ADHOC" if self.cache_status == "ADHOC" else "HOT"

    def cache_headers(self) -> dict[str, str]:
        return {"X-Cache": self.cache_status, "X-Route": self.route}

    @property
    def content_type(self) -> str:
        return self.fmt.content_type(self.out_rate)

    def usage(self) -> SpeechUsage:
        pieces = self.request.pieces  # prepared by the text front end before the cache lookup
        input_tokens = len(self.request.text) if pieces is None else sum(len(piece) for piece in pieces)
        # Rounded first: seconds summed chunk by chunk carry float error (0.96 s must not count 49 frames).
        output_tokens = math.ceil(round(self.audio_seconds * OUTPUT_TOKENS_PER_SECOND, 6))
        return SpeechUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )
