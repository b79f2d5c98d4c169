"""The back-end contract: what the server sees of any synthesis back end.

A back end turns a `SynthesisRequest` into an async iterator of mono float32 PCM chunks at
its native sample rate. Closing the iterator early (the client went away) must free
everything the request holds inside the engine. Encoding, resampling, speed change and
caching happen above this contract, identically for every engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

OPENAI_VOICES: tuple[str, ...] = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx",
    "nova", "sage", "shimmer", "verse", "marin", "cedar",
)  # fmt: skip


@dataclass(frozen=True)
class ReferenceAudio:
    """Audio a request clones from: mono float32 samples at `sample_rate`, plus an optional transcript.

    `content_hash` identifies the clip by content (never by a voice's name), for caches.
    """

    samples: np.ndarray
    sample_rate: int
    content_hash: str
    transcript: str | None = None


@dataclass
class SynthesisRequest:
    """One utterance to synthesise. Backends ignore fields they have no use for."""

    text: str
    voice: str = "alloy"
    instructions: str | None = None
    speed: float = 1.0
    seed: int | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    temperature: float = 1.0
    max_patches: int | None = None
    min_patches: int | None = None
    reference: ReferenceAudio | None = None
    normalize: bool | None = None  # text normalisation (numbers, dates...); None: the server's default
    request_id: str = ""


@dataclass
class BackendInfo:
    """What the server needs to know about an engine to shape requests and answer /v1/models."""

    name: str
    model_id: str
    sample_rate: int
    native_speed: bool
    can_clone: bool
    voices: tuple[str, ...] = OPENAI_VOICES
    languages: tuple[str, ...] = ("en",)
    extra: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """A speech engine. `generate` yields float32 mono chunks at `info.sample_rate`."""

    info: BackendInfo

    async def start(self) -> None:
        """Load and warm up; after this returns, `ready` is true."""

    async def stop(self) -> None:
        """Release everything; pending generations end."""

    @property
    def ready(self) -> bool: ...

    def validate(self, request: SynthesisRequest) -> None:
        """Raise a `BackendInputError` when the request cannot be served by this engine."""

    def generate(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        """Stream the utterance as float32 mono chunks; closing the iterator cancels the work."""
