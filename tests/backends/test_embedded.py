"""The embedded piper voice through the Backend contract: real synthesis, checked by ear (Whisper)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from helpers.asr import transcribe, word_error_rate
from polyvox.backends.base import OPENAI_VOICES, Backend, ReferenceAudio, SynthesisRequest
from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.embedded_voice import VoiceIntegrityError, locate_voice
from polyvox.backends.errors import BackendInputError, EmptyInput

TWO_SENTENCES = "The quick brown fox jumps over the lazy dog. Then it ran across the green field."


@pytest.fixture(scope="module")
def backend() -> EmbeddedBackend:
    backend = EmbeddedBackend()
    asyncio.run(backend.start())
    yield backend
    asyncio.run(backend.stop())


def synthesize(backend: EmbeddedBackend, text: str, **fields) -> list[np.ndarray]:
    async def collect() -> list[np.ndarray]:
        return [chunk async for chunk in backend.generate(SynthesisRequest(text=text, **fields))]

    return asyncio.run(collect())


def seconds(backend: EmbeddedBackend, chunks: list[np.ndarray]) -> float:
    return sum(len(chunk) for chunk in chunks) / backend.info.sample_rate


def test_engine_is_ready_after_start_and_describes_itself(backend):
    assert isinstance(backend, Backend)
    assert backend.ready
    voice_config = json.loads(locate_voice().config.read_text())
    assert backend.info.sample_rate == voice_config["audio"]["sample_rate"]
    assert backend.info.name == "embedded"
    assert backend.info.model_id == "polyvox-embedded"
    capabilities = backend.info.capabilities
    assert capabilities.native_speed is True and 1.0 < capabilities.max_native_speed <= 2.0
    assert capabilities.cloning is False and capabilities.voice_design is False
    assert set(backend.info.voices) == set(OPENAI_VOICES)


def test_not_ready_before_start():
    assert not EmbeddedBackend().ready


def test_speech_is_float32_mono_one_chunk_per_sentence_with_plausible_duration(backend):
    chunks = synthesize(backend, TWO_SENTENCES)
    assert len(chunks) == 2
    for chunk in chunks:
        assert chunk.dtype == np.float32
        assert chunk.ndim == 1
        assert np.all(np.isfinite(chunk))
        assert np.abs(chunk).max() <= 1.0
        assert np.sqrt(np.mean(chunk**2)) > 0.02  # not silence
    words = len(TWO_SENTENCES.split())
    # Conversational English runs at roughly 2-4 words per second.
    assert words / 5.0 < seconds(backend, chunks) < words / 1.5


@pytest.mark.parametrize(
    ("voice", "sentence"),
    [
        ("alloy", "Please call Stella and ask her to bring these things with her from the store."),
        ("nova", "The weather today is sunny and warm, so we will walk to the park."),
    ],
)
def test_speech_is_intelligible(backend, voice, sentence):
    audio = np.concatenate(synthesize(backend, sentence, voice=voice))
    heard = transcribe(audio, backend.info.sample_rate)
    assert word_error_rate(sentence, heard) <= 0.25, heard


@pytest.fixture(scope="module")
def normal_seconds(backend) -> float:
    """Duration of TWO_SENTENCES at speed 1, averaged over two runs (piper's durations vary a little)."""
    return float(np.mean([seconds(backend, synthesize(backend, TWO_SENTENCES)) for _ in range(2)]))


@pytest.mark.parametrize(("speed", "low", "high"), [(2.0, 0.38, 0.66), (0.5, 1.6, 2.5)])
def test_speed_changes_duration_natively(backend, normal_seconds, speed, low, high):
    normal = normal_seconds
    changed = np.mean([seconds(backend, synthesize(backend, TWO_SENTENCES, speed=speed)) for _ in range(2)])
    assert low < changed / normal < high


def test_fast_speech_stays_intelligible(backend):
    sentence = "Could you tell me the way to the nearest library?"
    audio = np.concatenate(synthesize(backend, sentence, speed=1.5))
    assert word_error_rate(sentence, transcribe(audio, backend.info.sample_rate)) <= 0.25


def test_every_openai_voice_speaks_and_instructions_are_ignored(backend):
    for voice in OPENAI_VOICES:
        chunks = synthesize(backend, "Hello there.", voice=voice, instructions="Speak like a pirate.")
        assert 0.3 < seconds(backend, chunks) < 3.0, voice


@pytest.mark.parametrize(
    "text",
    [
        "你好，世界。",
        "こんにちは、元気ですか？",
        "안녕하세요",
        "Привет, как дела?",
        "Hello 你好, how are you?",
    ],
)
def test_text_in_other_scripts_is_refused_as_unsupported_language(backend, text):
    with pytest.raises(BackendInputError) as refused:
        backend.validate(SynthesisRequest(text=text))
    assert refused.value.param == "input"
    assert refused.value.code == "unsupported_language"
    assert "English" in refused.value.message and "VoxCPM2" in refused.value.message


def test_generate_refuses_chinese_without_synthesising(backend):
    before = backend.sentences_synthesised
    with pytest.raises(BackendInputError) as refused:
        synthesize(backend, "今天天气很好。我们去公园吧。")
    assert refused.value.code == "unsupported_language"
    assert backend.sentences_synthesised == before


def test_english_with_greek_symbols_is_spoken(backend):
    chunks = synthesize(backend, "The value of π is about three, and α is the first letter.")
    assert seconds(backend, chunks) > 1.0


@pytest.mark.parametrize("text", ["", "   \n\t ", "?!..."])
def test_text_with_nothing_to_say_is_refused(backend, text):
    with pytest.raises(EmptyInput) as refused:
        backend.checked(SynthesisRequest(text=text))
    assert refused.value.param == "input"


def test_unknown_voice_is_refused(backend):
    with pytest.raises(BackendInputError) as refused:
        backend.validate(SynthesisRequest(text="Hello.", voice="darth"))
    assert refused.value.param == "voice"
    assert "alloy" in refused.value.message


def test_cloning_is_refused_with_a_pointer_to_voxcpm2(backend):
    reference = ReferenceAudio(samples=np.zeros(16000, np.float32), sample_rate=16000, content_hash="0" * 64)
    with pytest.raises(BackendInputError) as refused:
        backend.validate(SynthesisRequest(text="Hello.", reference=reference))
    assert refused.value.param == "voice"
    assert refused.value.code == "cloning_unsupported"
    assert "VoxCPM2" in refused.value.message


def test_closing_the_stream_after_the_first_sentence_stops_synthesis(backend):
    text = "This is the first sentence. Here is the second one. A third follows it. And a fourth ends it."

    async def first_chunk_then_close() -> np.ndarray:
        stream = backend.generate(SynthesisRequest(text=text))
        first = await anext(stream)
        await stream.aclose()
        return first

    before = backend.sentences_synthesised
    first = asyncio.run(first_chunk_then_close())
    assert first.size > 0
    assert backend.sentences_synthesised - before == 1

    before = backend.sentences_synthesised
    assert len(synthesize(backend, text)) == 4
    assert backend.sentences_synthesised - before == 4


def test_synthesis_runs_off_the_event_loop(backend):
    async def scenario() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        async def first_chunk():
            stream = backend.generate(SynthesisRequest(text=TWO_SENTENCES))
            await anext(stream)
            seen = ticks
            await stream.aclose()
            done.set()
            return seen

        seen, _ = await asyncio.gather(first_chunk(), ticker())
        return seen

    assert asyncio.run(scenario()) > 0


def test_concurrent_requests_all_complete(backend):
    texts = [f"This is request number {n}." for n in range(1, 6)]

    async def run_all():
        async def one(text):
            return [chunk async for chunk in backend.generate(SynthesisRequest(text=text))]

        return await asyncio.gather(*(one(text) for text in texts))

    results = asyncio.run(run_all())
    assert all(seconds(backend, chunks) > 0.5 for chunks in results)


def test_a_voice_file_that_does_not_match_the_pinned_hash_is_refused():
    backend = EmbeddedBackend(expected_sha256="0" * 64)
    with pytest.raises(VoiceIntegrityError, match="SHA-256"):
        asyncio.run(backend.start())
    assert not backend.ready
