"""TextPipeline, the text step: long text spoken piece by piece on a back end, pipelined, in order,
without clicks, cancellable.

Ordering is observed through `Recorder`, a wrapper around a real engine that logs when each piece's
generation starts, yields and ends, into the same list the consumer logs its chunks to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from helpers.asr import transcribe, word_error_rate
from helpers.backends import BackendWrapper
from polyvox.backends.base import Backend, SynthesisRequest
from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.backends.fake import FakeBackend
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.text.frontend import TextFrontend

FOUR_SENTENCES = (
    "The lighthouse keeper woke before dawn. "
    "He climbed the narrow stairs slowly. "
    "The lamp needed fresh oil again. "
    "By noon the storm had finally passed."
)


class Recorder(BackendWrapper):
    """A Backend wrapper that logs ("start" | "chunk" | "end" | "closed", piece index) per inner piece."""

    def __init__(self, inner: Backend, events: list[tuple[str, int]]):
        super().__init__(inner)
        self.events = events
        self.audio: dict[int, list[np.ndarray]] = {}

    async def speak(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        index = request.piece
        self.events.append(("start", index))
        self.audio[index] = []
        chunks = self.inner.generate(request)
        finished = False
        try:
            async for chunk in chunks:
                self.events.append(("chunk", index))
                self.audio[index].append(chunk)
                yield chunk
            finished = True
        finally:
            await chunks.aclose()
            self.events.append(("end" if finished else "closed", index))


@pytest.fixture(scope="module")
def embedded() -> EmbeddedBackend:
    backend = EmbeddedBackend(max_workers=1)  # one sentence at a time: pieces end in the order they start
    asyncio.run(backend.start())
    yield backend
    asyncio.run(backend.stop())


def piecewise(lookahead: int = 1, crossfade_ms: float = 10.0, **frontend) -> TextPipeline:
    frontend.setdefault("max_piece_chars", 45)
    return TextPipeline(TextFrontend(**frontend), lookahead=lookahead, crossfade_ms=crossfade_ms)


def speak(
    speech: TextPipeline, backend: Backend, text: str, events: list | None = None, **fields
) -> np.ndarray:
    async def collect() -> list[np.ndarray]:
        out = []
        async for chunk in speech.generate(backend, SynthesisRequest(text=text, request_id="r", **fields)):
            if events is not None:
                events.append(("out", len(out)))
            out.append(chunk)
        return out

    chunks = asyncio.run(collect())
    assert all(chunk.dtype == np.float32 and chunk.ndim == 1 for chunk in chunks)
    return np.concatenate(chunks)


def test_the_text_step_is_no_back_end_and_speaks_at_the_rate_of_the_one_it_is_given():
    speech = piecewise(normalize_default=False)
    assert not isinstance(speech, Backend) and not hasattr(speech, "inner")
    text = "The first piece is said here. And the second piece follows it."
    pieces = speech.frontend.prepare(text)
    assert len(pieces) == 2
    for rate in (24000, 16000):
        fake = FakeBackend(sample_rate=rate)
        audio = speak(speech, fake, text)
        assert len(audio) == sum(round(fake.duration_s(SynthesisRequest(text=p)) * rate) for p in pieces)


def test_first_audio_streams_before_the_last_piece_starts(embedded):
    events: list[tuple[str, int]] = []
    speak(piecewise(), Recorder(embedded, events), FOUR_SENTENCES, events)
    starts = [index for kind, index in events if kind == "start"]
    assert starts == [0, 1, 2, 3]
    assert events.index(("out", 0)) < events.index(("start", 3))


def test_the_next_piece_starts_before_the_current_one_finishes(embedded):
    events: list[tuple[str, int]] = []
    speak(piecewise(lookahead=1), Recorder(embedded, events), FOUR_SENTENCES, events)
    for n in range(3):
        assert events.index(("start", n + 1)) < events.index(("end", n))


def test_without_lookahead_pieces_run_one_after_another(embedded):
    events: list[tuple[str, int]] = []
    speak(piecewise(lookahead=0), Recorder(embedded, events), FOUR_SENTENCES, events)
    for n in range(3):
        assert events.index(("end", n)) < events.index(("start", n + 1))


def test_pieces_come_out_in_order_with_every_sample_and_quiet_seams(embedded):
    events: list[tuple[str, int]] = []
    recorder = Recorder(embedded, events)
    audio = speak(piecewise(crossfade_ms=10.0), recorder, FOUR_SENTENCES, events)
    pieces = [np.concatenate(recorder.audio[i]) for i in range(4)]
    reference = np.concatenate(pieces)
    assert len(audio) == len(reference)
    fade = round(0.010 * embedded.info.sample_rate)
    seams = np.cumsum([len(piece) for piece in pieces])[:-1]
    untouched = np.ones(len(audio), dtype=bool)
    for seam in seams:
        untouched[seam - fade : seam + fade] = False
        assert abs(float(audio[seam]) - float(audio[seam - 1])) < 0.01
        assert (
            np.max(np.abs(np.diff(audio[seam - fade : seam + fade])))
            <= np.max(np.abs(np.diff(reference))) + 1e-6
        )
    np.testing.assert_array_equal(audio[untouched], reference[untouched])


def test_long_text_is_heard_in_order_with_numbers_and_asides_read_aloud(embedded):
    text = "I bought 3 apples for $5.50. (laughs) Then I walked home. It was a good day."
    audio = speak(piecewise(max_piece_chars=40), embedded, text)
    heard = transcribe(audio, embedded.info.sample_rate)
    expected = (
        "I bought three apples for five dollars and fifty cents. "
        "Laughs, then I walked home. It was a good day."
    )
    assert word_error_rate(expected, heard) <= 0.25, heard


def test_closing_the_stream_closes_every_inner_generation():
    events: list[tuple[str, int]] = []
    inner = EmbeddedBackend(max_chars=24)  # several chunks per piece: piece 0 is still running at the close
    speech, backend = piecewise(lookahead=1, max_piece_chars=80), Recorder(inner, events)
    text = "The keeper woke, climbed the narrow stairs, and lit the lamp. " * 4

    async def first_chunk_then_close():
        await backend.start()
        try:
            stream = speech.generate(backend, SynthesisRequest(text=text, request_id="r"))
            await anext(stream)
            await stream.aclose()
        finally:
            await backend.stop()
        return stream

    stream = asyncio.run(first_chunk_then_close())
    started = {index for kind, index in events if kind == "start"}
    assert started == {0, 1} and len(stream.pieces) == 4
    finished = {index for kind, index in events if kind in ("end", "closed")}
    assert finished == started
    assert ("closed", 0) in events
    assert stream.pieces_done == 0


def test_cancelling_the_consumer_task_closes_inner_generations():
    fake = FakeBackend(chunk_delay_s=0.01)
    speech = piecewise(lookahead=2)

    async def cancel_midway():
        got_audio = asyncio.Event()

        async def consume():
            async for _ in speech.generate(fake, SynthesisRequest(text=FOUR_SENTENCES)):
                got_audio.set()

        task = asyncio.create_task(consume())
        await got_audio.wait()
        assert fake.active == 3
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert fake.active == 0
    assert fake.cancelled_requests == 3


def test_seams_without_a_fade_jump_and_with_one_do_not():
    def worst_seam_jump(crossfade_ms: float) -> float:
        fake = FakeBackend()
        speech = piecewise(crossfade_ms=crossfade_ms, normalize_default=False)
        text = "Tones of odd length. They end mid wave, loud! And then restart."
        pieces = speech.frontend.prepare(text)
        audio = speak(speech, fake, text)
        lengths = [round(fake.duration_s(SynthesisRequest(text=p)) * fake.info.sample_rate) for p in pieces]
        seams = np.cumsum(lengths)[:-1]
        assert len(seams) >= 2 and len(audio) == sum(lengths)
        return max(abs(float(audio[s]) - float(audio[s - 1])) for s in seams)

    assert worst_seam_jump(0.0) > 0.1
    assert worst_seam_jump(10.0) < 0.01


def test_usage_counts_pieces_and_characters():
    speech = piecewise()

    async def run():
        stream = speech.generate(FakeBackend(), SynthesisRequest(text=FOUR_SENTENCES))
        chunks = [chunk async for chunk in stream]
        return stream, chunks

    stream, chunks = asyncio.run(run())
    assert len(stream.pieces) == 4
    assert stream.pieces_done == 4
    assert stream.characters == sum(len(piece) for piece in stream.pieces) >= len(FOUR_SENTENCES) - 3
    assert speech.pieces_spoken == 4
    assert speech.characters_spoken == stream.characters


def test_every_piece_shares_the_voice_and_one_seed():
    events: list[tuple[str, int]] = []
    fake = FakeBackend()
    seen: list[SynthesisRequest] = []

    class Spy(Recorder):
        async def speak(self, request):
            seen.append(request)
            async for chunk in super().speak(request):
                yield chunk

    speak(piecewise(), Spy(fake, events), FOUR_SENTENCES, voice="nova", instructions="calm")
    assert len(seen) == 4
    assert {(r.voice, r.instructions) for r in seen} == {("nova", "calm")}
    assert len({r.seed for r in seen}) == 1 and seen[0].seed is not None
    assert [(r.request_id, r.piece) for r in seen] == [("r", 0), ("r", 1), ("r", 2), ("r", 3)]


def test_a_failing_piece_fails_the_stream_after_the_earlier_pieces_and_frees_the_rest():
    fake = FakeBackend()
    speech = piecewise(lookahead=2, normalize_default=False)
    text = "First piece is fine. Second one breaks [fail] here. Third never plays. Fourth neither."

    async def run():
        out = []
        with pytest.raises(BackendError):
            async for chunk in speech.generate(fake, SynthesisRequest(text=text)):
                out.append(chunk)
        return out

    out = asyncio.run(run())
    first_piece = round(
        fake.duration_s(SynthesisRequest(text="First piece is fine.")) * fake.info.sample_rate
    )
    assert sum(len(chunk) for chunk in out) >= first_piece - round(0.01 * fake.info.sample_rate)
    assert fake.active == 0


def test_checked_checks_every_piece_with_the_engine(embedded):
    speech = piecewise()
    checked = speech.checked(embedded, SynthesisRequest(text=FOUR_SENTENCES))
    assert checked.pieces is not None and len(checked.pieces) == 4
    with pytest.raises(BackendInputError) as refused:
        speech.checked(embedded, SynthesisRequest(text=FOUR_SENTENCES + " 这一句是中文。"))
    assert refused.value.code == "unsupported_language"
    with pytest.raises(BackendInputError):
        speech.checked(embedded, SynthesisRequest(text=" ... !!! "))


def test_a_single_piece_passes_through_untouched(embedded):
    events: list[tuple[str, int]] = []
    recorder = Recorder(embedded, events)
    audio = speak(piecewise(), recorder, "Just one short sentence.")
    np.testing.assert_array_equal(audio, np.concatenate(recorder.audio[0]))


def test_pieces_overlap_on_the_batching_voxcpm2_engine():
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.core.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    events: list[tuple[str, int]] = []
    inner = VoxCPMBackend(
        VoxCPM2.random("tiny", device="cpu", dtype="float32"), BatchingConfig(num_kv_blocks=256)
    )
    recorder = Recorder(inner, events)
    speech = piecewise(max_piece_chars=30)
    text = "(calmly) The first piece. 第二段在这里。 The third piece, 3 words."

    async def run():
        await recorder.start()
        try:
            stream = speech.generate(
                recorder, SynthesisRequest(text=text, request_id="r", instructions="calm", max_patches=3)
            )
            return stream, [chunk async for chunk in stream]
        finally:
            await recorder.stop()

    stream, chunks = asyncio.run(run())
    assert stream.pieces == ["calmly, The first piece.", "第二段在这里。", "The third piece, three words."]
    assert events.index(("start", 1)) < events.index(("end", 0))
    assert events.index(("chunk", 1)) < events.index(("end", 0))  # batched together, not one after another
    audio = np.concatenate(chunks)
    assert len(audio) == 3 * 3 * 7680 and np.isfinite(audio).all()
    inner_audio = [np.concatenate(recorder.audio[i]) for i in range(3)]
    np.testing.assert_array_equal(audio[: 3 * 7680 - 480], inner_audio[0][:-480])
