"""`SpeechPlan`: what one speech request was decided to be, once, as it was prepared (the back end's
request, how its audio is delivered, its cache key); `SpeechJob`: that plan as it runs (its cache
status, its admission slot, the audio made) and the usage it is billed: characters spoken in, 20 ms
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
# front end prepared them (back ends do not share a tokenizer), the same whether the audio came from the
# back end or the cache; without a front end, characters of input. Output tokens are 20 ms audio
# frames, i.e. 50 per second of audio.
OUTPUT_TOKENS_PER_SECOND = 50


@dataclass(frozen=True)
class SpeechPlan:
    """One speech request as `SpeechService.prepare` decided it, never changed after: what to say piece
    by piece, in which voice, with which parameters and sampling seed (`request`: the seed fixed, the
    client's or one drawn for it), into which format and rate, at which speed and pitch, timed at which
    granularities, cached under which key (None: not cached), and the client's own seed (None when it
    gave none: what the cache key holds, so any audio of an unseeded request serves it)."""

    request: SynthesisRequest
    fmt: formats.AudioFormat
    out_rate: int
    pipeline_speed: float
    stream: bool
    # semitones, shifted by the OutputPipeline: after the cache, whose audio serves every pitch
    pitch: float = 0.0
    # `timestamp_granularities` as asked ("word", "segment"); the pieces timed go to `timeline`
    granularities: tuple[str, ...] = ()
    cache_key: str | None = None
    client_seed: int | None = None

    @property
    def timeline(self) -> Timeline | None:
        """The answer's pieces with their words as they are timed (on the answer's clock, after speed);
        None when no timestamps were asked."""
        return self.request.timeline

    @property
    def content_type(self) -> str:
        return self.fmt.content_type(self.out_rate)


@dataclass
class SpeechJob:
    """One speech request running: its plan, and what happened to it so far."""

    plan: SpeechPlan
    received_at: float = field(default_factory=time.perf_counter)
    cache_status: str = "DISABLED"  # X-Cache: HIT, MISS, BYPASS, ADHOC, DISABLED or MISS-STORE-FAILED
    cached: CachedAudio | None = None
    admitted: bool = False
    audio_seconds: float = 0.0

    @property
    def route(self) -> str:
        """X-Route: CACHE (served from the cache), ADHOC (one-off clone) or HOT (the back end)."""
        if self.cached is not None:
            return "CACHE"
        return "ADHOC" if self.cache_status == "ADHOC" else "HOT"

    def cache_headers(self) -> dict[str, str]:
        return {"X-Cache": self.cache_status, "X-Route": self.route}

    def usage(self) -> SpeechUsage:
        request = self.plan.request
        pieces = request.pieces  # prepared by the text front end before the cache lookup
        input_tokens = len(request.text) if pieces is None else sum(len(piece) for piece in pieces)
        # Rounded first: seconds summed chunk by chunk carry float error (0.96 s must not count 49 frames).
        output_tokens = math.ceil(round(self.audio_seconds * OUTPUT_TOKENS_PER_SECOND, 6))
        return SpeechUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        )
