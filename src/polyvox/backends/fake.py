"""A deterministic tone back end for tests: speaks every character as a slice of a sine wave.

It follows the Backend contract to the letter (async chunks, cancellation frees the request) and
can be told to be slow, to fail, or to wait before it is ready, so server behaviour can be
tested without a model. Never served to users.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator

import numpy as np

from polyvox.backends.base import Backend, BackendCapabilities, BackendInfo, SynthesisRequest
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.runtime.ready_signal import ReadySignal


class FakeBackend(Backend):
    """Yields `seconds_per_char` of a 440 Hz tone per input character, in `chunk_s` pieces.

    Text containing `fail_marker` raises `BackendError` mid-stream; text containing
    `reject_marker` is refused by `validate` with a `BackendInputError`. `chunk_delay_s` sleeps
    between chunks (a slow back end); `ready_gate`, when given, holds `start()` until it is set; `die()`
    stops it serving as a crashed runtime would;
    `generate_gate` holds every generation before its first chunk until it is set; `hold_gate` holds
    it after `hold_after_s` seconds of audio until it is set. With `cloning` it declares that it
    clones and takes a reference clip (ignoring it), so voices can be stored and spoken.
    """

    def __init__(
        self,
        sample_rate: int = 24000,
        seconds_per_char: float = 0.02,
        chunk_s: float = 0.1,
        chunk_delay_s: float = 0.0,
        native_speed: bool = False,
        ready_gate: threading.Event | None = None,
        generate_gate: threading.Event | None = None,
        hold_gate: threading.Event | None = None,
        hold_after_s: float = 0.0,
        fail_marker: str = "[fail]",
        reject_marker: str = "[reject]",
        voices: tuple[str, ...] | None = None,
        cloning: bool = False,
    ):
        self.info = BackendInfo(
            name="fake",
            model_id="polyvox-fake",
            sample_rate=sample_rate,
            capabilities=BackendCapabilities(native_speed=native_speed, cloning=cloning),
        )
        if voices is not None:
            self.info.voices = voices
        self.seconds_per_char = seconds_per_char
        self.chunk_s = chunk_s
        self.chunk_delay_s = chunk_delay_s
        self.ready_gate = ready_gate
        self.generate_gate = generate_gate
        self.hold_gate = hold_gate
        self.hold_after_s = hold_after_s
        self.fail_marker = fail_marker
        self.reject_marker = reject_marker
        self.active = 0
        self.started_requests = 0
        self.cancelled_requests = 0
        self.last_request: SynthesisRequest | None = None
        self._ready = False
        self._ready_signal = ReadySignal()  # announced at each change of `_ready`

    @property
    def ready(self) -> bool:
        return self._ready

    async def until_ready(self, ready: bool = True) -> None:
        await self._ready_signal.until(lambda: self._ready == ready)

    def _set_ready(self, ready: bool) -> None:
        self._ready = ready
        self._ready_signal.announce()

    async def start(self) -> None:
        if self.ready_gate is not None:
            while not self.ready_gate.is_set():
                await asyncio.sleep(0.01)
        self._set_ready(True)

    async def stop(self) -> None:
        self._set_ready(False)

    def die(self) -> None:
        """Stop serving at once, as a crashed runtime would (any thread may call it)."""
        self._set_ready(False)

    def validate(self, request: SynthesisRequest) -> None:
        if self.reject_marker in request.text:
            raise BackendInputError("this engine cannot speak that text", param="input", code="unspeakable")
        if request.reference is not None and not self.info.capabilities.cloning:
            raise BackendInputError(
                "the fake engine cannot clone voices",
                param=request.reference.field,
                code="cloning_unsupported",
            )

    def duration_s(self, request: SynthesisRequest) -> float:
        """Seconds of audio `generate` yields for this request."""
        return len(request.text) * self.seconds_per_char / request.speed

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        self.validate(request)
        self.last_request = request
        self.started_requests += 1
        self.active += 1
        rate = self.info.sample_rate
        total = round(self.duration_s(request) * rate)
        step = max(1, round(self.chunk_s * rate))
        finished = False
        try:
            while self.generate_gate is not None and not self.generate_gate.is_set():
                await asyncio.sleep(0.01)
            for start in range(0, total, step):
                if self.hold_gate is not None and start >= self.hold_after_s * rate:
                    while not self.hold_gate.is_set():
                        await asyncio.sleep(0.01)
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
                else:
                    await asyncio.sleep(0)
                if self.fail_marker in request.text and start > 0:
                    raise BackendError("the fake engine failed as asked")
                t = np.arange(start, min(start + step, total), dtype=np.float64) / rate
                yield (0.3 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
            if self.fail_marker in request.text:
                raise BackendError("the fake engine failed as asked")
            finished = True
        finally:
            self.active -= 1
            if not finished:
                self.cancelled_requests += 1
