"""The embedded piper voice shared by several requests: which sentence the worker synthesises next.

Requests go through the real long-text pipeline (TextPipeline, one piece ahead) to the real
piper voice on one worker. `Recording` is the embedded engine that also notes each sentence as
its synthesis starts, and can hold the worker on a chosen sentence until the test lets it go, so
every request has queued its sentences before the worker chooses.
"""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.text.frontend import TextFrontend

GATE = "Please hold the line for a moment."
NAMES = ("Alpha", "Bravo", "Charlie")
ORDINALS = ("first", "second", "third")


def script(name: str, sentences: int = 3) -> str:
    """Sentences of one request. The first is long, so a listener playing it has seconds of audio in
    hand while the others' first sentences are made: a stream about to run dry would go first."""
    first = f"{name} reads the first line, a long unhurried sentence that keeps a listener busy for a while."
    rest = [f"{name} reads the {ORDINALS[n]} line." for n in range(1, sentences)]
    return " ".join([first, *rest])


def who(sentence: str) -> tuple[str, int]:
    """(request name, sentence index) of a sentence from `script`."""
    words = sentence.split()
    return words[0], ORDINALS.index(words[3])


class Recording(EmbeddedBackend):
    """The embedded engine, noting each sentence as it starts; the GATE sentence waits for `release`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.started: list[str] = []
        self.gate_entered = threading.Event()
        self.release = threading.Event()

    def _synthesize(self, voice, sentence: str, config, spans=None) -> np.ndarray:
        self.started.append(sentence)
        if sentence == GATE:
            self.gate_entered.set()
            self.release.wait(timeout=60)
        return super()._synthesize(voice, sentence, config, spans)

    def spoken(self) -> list[tuple[str, int]]:
        return [who(sentence) for sentence in self.started if sentence != GATE]


@pytest.fixture
def backend() -> Recording:
    backend = Recording(max_workers=1)
    asyncio.run(backend.start())
    yield backend
    backend.release.set()
    asyncio.run(backend.stop())


def pipeline() -> TextPipeline:
    return TextPipeline(TextFrontend(normalize_default=False), lookahead=1)


async def collect(stream) -> list[np.ndarray]:
    return [chunk async for chunk in stream]


async def until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the queue never reached the expected state"
        await asyncio.sleep(0.01)


async def hold_worker(backend: Recording, speech: TextPipeline) -> asyncio.Task:
    gate = asyncio.ensure_future(collect(speech.generate(backend, SynthesisRequest(text=GATE))))
    await asyncio.to_thread(backend.gate_entered.wait, 30)
    return gate


def test_every_request_hears_its_first_sentence_before_any_request_gets_its_second(backend):
    # Playback stands still while the worker runs: every stream stays ahead of its listener, as on a CPU
    # much faster than real time. On the wall clock a loaded machine can make a playing stream run dry,
    # and then it rightly goes first (tests/backends/test_fair_queue.py tests that choice).
    backend._queue.clock = lambda: 0.0
    speech = pipeline()

    async def scenario() -> list[list[np.ndarray]]:
        gate = await hold_worker(backend, speech)
        requests = [SynthesisRequest(text=script(name)) for name in NAMES]
        streams = [asyncio.ensure_future(collect(speech.generate(backend, request))) for request in requests]
        await until(lambda: backend.sentences_waiting == 2 * len(NAMES))  # each: its piece and the next
        backend.release.set()
        await gate
        return await asyncio.gather(*streams)

    results = asyncio.run(scenario())
    spoken = backend.spoken()
    assert {index for _, index in spoken[: len(NAMES)]} == {0}
    assert {name for name, _ in spoken[: len(NAMES)]} == set(NAMES)
    for name in NAMES:
        assert [index for who_, index in spoken if who_ == name] == [0, 1, 2]
    for chunks in results:
        seconds = sum(len(chunk) for chunk in chunks) / backend.info.sample_rate
        assert 6.0 < seconds < 20.0  # three sentences each, all spoken


def test_a_request_that_goes_away_drops_its_waiting_sentences(backend):
    speech = pipeline()

    async def scenario() -> list[np.ndarray]:
        gate = await hold_worker(backend, speech)
        leaving = asyncio.ensure_future(
            collect(speech.generate(backend, SynthesisRequest(text=script("Alpha"))))
        )
        staying = asyncio.ensure_future(
            collect(speech.generate(backend, SynthesisRequest(text=script("Bravo", 2))))
        )
        await until(lambda: backend.sentences_waiting == 4)
        leaving.cancel()
        await until(lambda: backend.sentences_waiting == 2)
        backend.release.set()
        await gate
        return await staying

    chunks = asyncio.run(scenario())
    assert backend.spoken() == [("Bravo", 0), ("Bravo", 1)]
    assert sum(len(chunk) for chunk in chunks) / backend.info.sample_rate > 1.5
