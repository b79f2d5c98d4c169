"""The back-end contract: what the server sees of any synthesis back end.

A back end turns a `SynthesisRequest` into an `AudioStream` of mono float32 PCM chunks at
its native sample rate. Closing the stream early (the client went away) must free
everything the request holds inside the back end. Encoding, resampling, speed change and
caching happen above this contract, identically for every back end.

What a back end can do is declared, never probed: `BackendInfo.capabilities` says whether it clones,
designs voices and changes speed itself; the optional parts of the contract (batching statistics,
the batching engine's data-parallel ranks, the voice prompt cache's counters, the lexicon, the back end that
speaks text as written) are methods with defaults here, which a back end that has them overrides.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from polyvox.backends.errors import BackendInputError, EmptyInput

# What the batching engine reports of itself is its own data; the contract passes it on as it is.
from polyvox.engine.stats import EngineRank, PromptCacheStats
from polyvox.text.emotion import EMOTIONS, NEUTRAL_ONLY
from polyvox.text.frontend import has_words

if TYPE_CHECKING:
    from polyvox.alignment.aligners import Span
    from polyvox.alignment.timeline import Timeline
    from polyvox.backends.fair_queue import Listener
    from polyvox.core.stats import BatchingStats

__all__ = [
    "OPENAI_VOICES",
    "VOICE_NAME",
    "AdapterInfo",
    "AudioStream",
    "Backend",
    "BackendCapabilities",
    "BackendInfo",
    "EngineRank",
    "PromptCacheStats",
    "ReferenceAudio",
    "SynthesisRequest",
]

READY_POLL_S = 0.05  # how often `Backend.until_ready`'s default looks, for a back end that announces nothing

OPENAI_VOICES: tuple[str, ...] = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx",
    "nova", "sage", "shimmer", "verse", "marin", "cedar",
)  # fmt: skip

# A stored voice's name; a LoRA adapter's name is one too (a loaded adapter is also a voice).
VOICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ReferenceAudio:
    """Audio a request clones from: mono float32 samples at `sample_rate`, plus an optional transcript.

    `content_hash` identifies the clip by content (never by a voice's name), for caches. `field` is
    the request field a back end's refusal of the clip names: the one a one-off clip came in
    (`ref_audio`, `voice_file`...), `voice` for a stored voice's clip.
    """

    samples: np.ndarray
    sample_rate: int
    content_hash: str
    transcript: str | None = None
    field: str = "voice"


@dataclass
class SynthesisRequest:
    """One utterance to synthesise. Backends ignore fields they have no use for."""

    text: str
    voice: str = "alloy"
    instructions: str | None = None
    emotion: str | None = None  # one of `text.emotion.EMOTIONS`; None: none asked (the voice as it is)
    speed: float = 1.0
    seed: int | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    temperature: float = 1.0
    max_patches: int | None = None
    min_patches: int | None = None
    reference: ReferenceAudio | None = None
    normalize: bool | None = None  # text normalisation (numbers, dates...); None: the server's default
    lora: str | None = None  # a loaded LoRA adapter to speak with
    lora_digest: str | None = None  # its content digest: cached audio never outlives a replaced adapter
    request_id: str = ""
    piece: int | None = None  # which piece of `request_id`'s long input this is (the text front end's)
    # `text` as the text step prepared it for the plan, piece by piece, once checked
    # (`TextPipeline.checked`): the pieces generated are the pieces checked. None: not prepared yet.
    pieces: tuple[str, ...] | None = None
    # Whose request this is, piece after piece (the text front end gives each request one), for a back end
    # that shares a few workers among requests fairly (the embedded voice's FairQueue). None: its own.
    listener: Listener | None = None
    # Where the answer's pieces go once each is timed (`PieceTiming`: the client's words and when they are
    # heard, on the back end's clock), filled in by the text front end's `PieceStream`. None: no word
    # timestamps asked, nothing timed.
    timeline: Timeline | None = None
    # One piece's spoken words, for a back end that times them itself (`capabilities.word_timings`): it
    # appends one `Span` per word of `text` (split on whitespace), seconds from the piece's first sample,
    # by the time its stream ends. None: not asked.
    spans: list[Span] | None = None


@dataclass(frozen=True)
class BackendCapabilities:
    """What a back end can do, so no layer above has to guess."""

    cloning: bool = False  # speaks in the voice of a `ReferenceAudio` (cloned and stored voices)
    voice_design: bool = False  # `instructions` describe a voice (voice design, builtin voices)
    native_speed: bool = False  # honours `SynthesisRequest.speed` itself, up to `max_native_speed`
    max_native_speed: float = float("inf")
    lora: bool = False  # serves LoRA adapters (`SynthesisRequest.lora`, `load_adapter`)
    word_timings: bool = False  # times the words it speaks itself (fills `SynthesisRequest.spans`)

    @property
    def emotions(self) -> tuple[str, ...]:
        """The `emotion`s the back end speaks: every one where it designs voices (a style in the
        description), else only `neutral` (its voices' one delivery)."""
        return EMOTIONS if self.voice_design else NEUTRAL_ONLY

    def check_emotion(self, emotion: str | None, engine: str) -> None:
        """A `BackendInputError` naming `emotion` (and `engine`, the back end's name) when the back end
        cannot speak it."""
        if emotion is not None and emotion not in self.emotions:
            raise BackendInputError(
                f"the {engine} engine has no voice design and speaks every voice one way: emotion "
                f"{emotion!r} is not available on it (it accepts {', '.join(self.emotions)}; serve a "
                "VoxCPM2 checkpoint for the others)",
                param="emotion",
                code="voice_design_unsupported",
            )

    def split_speed(self, speed: float) -> tuple[float, float]:
        """(back end speed, pipeline speed) whose product is `speed`: a back end with native speed applies
        it up to `max_native_speed`, the OutputPipeline time-stretches the rest."""
        backend_speed = min(speed, self.max_native_speed) if self.native_speed else 1.0
        return backend_speed, speed / backend_speed


@dataclass(frozen=True)
class AdapterInfo:
    """A LoRA adapter a back end serves: its name, directory, rank, the linear layers it adapts and the
    hex digest of its content."""

    name: str
    path: str
    rank: int
    layers: int
    digest: str


@dataclass
class BackendInfo:
    """What the server needs to know about a back end to shape requests and answer /v1/models.

    `extra` holds labels that identify the audio a back end makes (device, dtype, revision, voice hash):
    strings by nature, part of the audio cache's key; numbers and capabilities have typed fields.

    `reference_rate` is the rate the back end takes a `ReferenceAudio` at (VoxCPM2: its AudioVAE's input
    rate), so voice clips are decoded straight to it; None for a back end that cannot clone.

    `voice_descriptions` says how the back end's own voices differ (the embedded voice's delivery styles);
    a voice it does not describe is described by its builtin design, if any."""

    name: str
    model_id: str
    sample_rate: int
    capabilities: BackendCapabilities = BackendCapabilities()
    reference_rate: int | None = None
    voices: tuple[str, ...] = OPENAI_VOICES
    languages: tuple[str, ...] = ("en",)
    extra: dict[str, str] = field(default_factory=dict)
    voice_descriptions: dict[str, str] = field(default_factory=dict)


class AudioStream(Protocol):
    """The chunks of one utterance (an async generator is one); `aclose()` cancels the work."""

    def __aiter__(self) -> AsyncIterator[np.ndarray]: ...

    def __anext__(self) -> Awaitable[np.ndarray]: ...

    def aclose(self) -> Awaitable[None]: ...


@runtime_checkable
class Backend(Protocol):
    """A speech back end, what the server speaks to. `generate` yields float32 mono chunks at
    `info.sample_rate`.

    Back ends subclass this to inherit the optional methods' defaults."""

    info: BackendInfo

    async def start(self) -> None:
        """Load and warm up; after this returns, `ready` is true."""

    async def stop(self) -> None:
        """Release everything; pending generations end."""

    @property
    def ready(self) -> bool: ...

    async def until_ready(self, ready: bool = True) -> None:
        """Return once `self.ready == ready` (at once if it is): what a request waiting for a restarting
        back end and the supervisor await. Every back end here overrides it with its own `ReadySignal`,
        announced where the state changes; this default, for a back end written elsewhere that announces
        nothing, looks again every `READY_POLL_S`."""
        while self.ready != ready:
            await asyncio.sleep(READY_POLL_S)

    @property
    def restarts_itself(self) -> bool:
        """The back end starts again by itself whatever of it dies (engine processes, each rank with its
        own backoff): the server's supervisor then only waits, never rebuilds the whole back end."""
        return False

    def validate(self, request: SynthesisRequest) -> None:
        """Raise a `BackendInputError` when the request cannot be served by this back end."""

    def checked(self, request: SynthesisRequest) -> SynthesisRequest:
        """The request as this back end will speak it, checked once (`validate`; a `BackendInputError`
        naming the parameter), spoken as written, in one piece: what a text step without a front end
        checks (`TextPipeline.checked`; with a front end it checks each piece with `validate`). The front
        end's rule refuses text with nothing to say (`EmptyInput`) here too, before the back end's own
        checks."""
        if not has_words(request.text):
            raise EmptyInput()
        self.validate(request)
        return request

    async def check_voice(self, reference: ReferenceAudio) -> None:
        """Raise a `BackendInputError` when a voice cloned from `reference` (a stored voice's clip and
        transcript) could never speak on this back end, so it is refused when stored rather than on every
        request; nothing by default. Called only when `capabilities.cloning`."""

    def generate(self, request: SynthesisRequest) -> AudioStream:
        """Stream the utterance as float32 mono chunks; closing the stream cancels the work."""
        ...

    def stats(self) -> BatchingStats | None:
        """The continuous-batching engine's counters; None for a back end that does not batch."""
        return None

    def prompt_cache_stats(self) -> PromptCacheStats:
        """Voice prompts encoded and reused; zeros for a back end without a prompt cache."""
        return PromptCacheStats()

    def engine_ranks(self) -> list[EngineRank]:
        """The batching engine's data-parallel ranks (one when it runs in-thread); none for a back end
        that does not batch."""
        stats = self.stats()
        return [EngineRank(self.ready, stats)] if stats is not None else []

    def adapters(self) -> dict[str, AdapterInfo]:
        """The LoRA adapters loaded, by name; none for a back end without `capabilities.lora`."""
        return {}

    async def load_adapter(self, name: str, path: str) -> AdapterInfo:
        """Load (or replace) adapter `name` from the directory `path`; BackendInputError naming what is
        wrong with it."""
        raise BackendInputError(f"the {self.info.name} engine serves no LoRA adapters", param="name")

    async def unload_adapter(self, name: str) -> bool:
        """Unload adapter `name`; False when none of that name is loaded."""
        return False
