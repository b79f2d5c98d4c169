"""A tiny random-weight VoxCPM2 (CPU) behind the text front end, served on loopback, for the streaming tests.

`Forced` wraps the real VoxCPM2 engine to fix every generation's length (random weights would stop
wherever their stop head says) and to record what the engine was asked to speak; it can also hold
the generation of chosen pieces (or every piece after its first chunk) until a test lets them go.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest

from helpers.backends import BackendWrapper
from helpers.clips import wav_bytes
from helpers.server import running_server
from polyvox.backends.base import SynthesisRequest
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

PATCH_SAMPLES = 7680  # one 160 ms patch at 48 kHz
PATCHES = 3  # per piece, unless the piece says LONG_WORD
LONG_WORD = "marathon"
LONG_PATCHES = 300


class Forced(BackendWrapper):
    """The VoxCPM2 engine with fixed generation lengths, a log of requests, and an optional hold."""

    def __init__(self, inner: VoxCPMBackend):
        super().__init__(inner)
        self.requests: list[SynthesisRequest] = []
        self.hold: Callable[[SynthesisRequest], bool] | None = None
        self.hold_after_first_chunk = False
        self.release = threading.Event()

    @property
    def texts(self) -> list[str]:
        return [request.text for request in self.requests]

    async def speak(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        self.requests.append(request)
        if self.hold is not None and self.hold(request):
            await self._held()
        patches = LONG_PATCHES if LONG_WORD in request.text else PATCHES
        forced = replace(request, min_patches=patches, max_patches=patches)
        first = True
        async with contextlib.aclosing(self.inner.generate(forced)) as chunks:
            async for chunk in chunks:
                yield chunk
                if first and self.hold_after_first_chunk:
                    await self._held()
                first = False

    async def _held(self) -> None:
        for _ in range(6000):
            if self.release.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("a held generation was never released")

    def reset(self) -> None:
        self.requests.clear()
        self.hold = None
        self.hold_after_first_chunk = False
        self.release.clear()


@pytest.fixture(scope="session")
def tiny_model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


@pytest.fixture
def tiny_server(tiny_model) -> Iterator[Callable[..., tuple[str, Forced]]]:
    """`tiny_server(**settings)` serves the tiny VoxCPM2 behind the text front end; returns (url, engine)."""
    with contextlib.ExitStack() as stack:

        def start(**overrides) -> tuple[str, Forced]:
            overrides.setdefault("request_timeout_s", 600)
            settings = Settings(**overrides)
            backend = Forced(VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=1024)))
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
            return stack.enter_context(running_server(app)), backend

        yield start


@pytest.fixture(scope="module")
def shared(tiny_model) -> Iterator[tuple[str, Forced]]:
    """One server for a module's tests that need no special settings."""
    settings = Settings(request_timeout_s=600)
    backend = Forced(VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=1024)))
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as url:
        yield url, backend


@pytest.fixture
def server(shared) -> tuple[str, Forced]:
    url, backend = shared
    backend.reset()
    return url, backend


def poll_until(
    condition: Callable[[], bool],
    what: str,
    timeout_s: float = 60.0,
    seen: Callable[[], object] | None = None,
) -> None:
    """Wait for `condition`; past `timeout_s`, fail naming `what` and, given `seen`, what it last read."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}" + (f"; last seen: {seen()}" if seen else ""))
        time.sleep(0.01)


def tone_wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return wav_bytes(0.3 * np.sin(2 * np.pi * 180 * t), rate)
