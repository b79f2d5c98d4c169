"""Pipecat's ElevenLabs services pointed at polyvox, run in a pipeline without a transport (Pipecat's own
`run_test`), with the embedded voice: the WebSocket service (`url=ws://host/elevenlabs`) and the HTTP one
(`base_url=http://host/elevenlabs`, `stream/with-timestamps`) each push audio a recogniser hears as the
text, and a word frame per word of the text, in order, spread over the audio as its words are."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np
import pytest
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService, ElevenLabsTTSService
from pipecat.workers.runner import WorkerRunner

from agents.conftest import VOICE
from helpers.asr import HEARD_WER, transcribe, word_error_rate

# Importing pipecat replaces asyncio.wait_for with wait_for2's for the whole process on Python < 3.12,
# which changes how a cancelled wait ends for every test after it (collection imports this module
# before any test runs): the standard one (still asyncio.tasks') is put back here, and pipecat's is
# used only during these tests.
_PIPECAT_WAIT_FOR, asyncio.wait_for = asyncio.wait_for, asyncio.tasks.wait_for


@pytest.fixture(autouse=True)
def _pipecat_wait_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio, "wait_for", _PIPECAT_WAIT_FOR)


TEXT = "The garden gate was open. Two cats sat on the warm stone wall."
HEARD = "the garden gate was open two cats sat on the warm stone wall"
RATE = 24000


class Collect(FrameProcessor):
    """The pipeline's end: keeps every frame that reaches it; `stopped` once the TTS says it is done."""

    def __init__(self):
        super().__init__()
        self.frames: list[Frame] = []
        self.stopped = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        self.frames.append(frame)
        if isinstance(frame, TTSStoppedFrame):
            self.stopped.set()
        await self.push_frame(frame, direction)


async def _speak(tts: FrameProcessor) -> list[Frame]:
    """`TEXT` through `tts` in a pipeline with no transport, ended once the TTS has stopped speaking."""
    sink = Collect()
    worker = PipelineWorker(Pipeline([tts, sink]), cancel_on_idle_timeout=False)
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(worker, frame):
        started.set()

    async def drive():
        await asyncio.wait_for(started.wait(), 60)
        await worker.queue_frame(TTSSpeakFrame(TEXT))
        await asyncio.wait_for(sink.stopped.wait(), 120)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    return sink.frames


def _check(frames) -> None:
    audio = b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame))
    samples = np.frombuffer(audio, dtype=np.int16).astype(np.float32) / 32768
    seconds = samples.size / RATE
    assert len(TEXT) / 30 < seconds < len(TEXT) / 5
    assert word_error_rate(HEARD, transcribe(samples, RATE)) <= HEARD_WER
    words = [f for f in frames if isinstance(f, TTSTextFrame)]
    assert [w.text for w in words] == TEXT.split(), "a word frame per word: are word timings wired?"
    times = [(w.pts - words[0].pts) / 1e9 for w in words]  # Pipecat's clock starts where it likes
    assert times == sorted(times)
    assert times[-1] <= seconds
    # Spread over the audio as speech is: the second sentence's first word after the middle of the
    # first sentence's audio, the last word in the second half.
    assert times[TEXT.split().index("Two")] > seconds / 4
    assert times[-1] > seconds / 2


def test_the_websocket_service_speaks_with_word_timings(embedded_url):
    tts = ElevenLabsTTSService(
        api_key="not-needed-on-an-open-server",
        url=embedded_url.replace("http://", "ws://") + "/elevenlabs",
        settings=ElevenLabsTTSService.Settings(voice=VOICE),
        sample_rate=RATE,
    )
    _check(asyncio.run(_speak(tts)))


def test_the_http_service_speaks_with_word_timings(embedded_url):
    async def run():
        async with aiohttp.ClientSession() as http:
            tts = ElevenLabsHttpTTSService(
                api_key="not-needed-on-an-open-server",
                base_url=f"{embedded_url}/elevenlabs",
                aiohttp_session=http,
                settings=ElevenLabsHttpTTSService.Settings(voice=VOICE),
                sample_rate=RATE,
            )
            return await _speak(tts)

    _check(asyncio.run(run()))
