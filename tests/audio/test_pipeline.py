import io
import os
import wave

import numpy as np
import pytest
import soundfile

from polyvox.audio import OutputPipeline, UnsupportedFormat, UnsupportedSampleRate, render

from .signals import TONE_HZ, chunks, dominant_frequency, pyav_decode, tone

ENGINE_RATE = 48000


def run(pipeline: OutputPipeline, seconds: float) -> bytes:
    samples = tone(seconds, ENGINE_RATE)
    parts = [pipeline.push(c) for c in chunks(samples, 7680)]  # one VoxCPM2 patch per chunk
    return b"".join(parts) + pipeline.finish()


def test_48k_engine_audio_becomes_24k_mp3_at_speed_1_5():
    pipeline = OutputPipeline(ENGINE_RATE, 24000, "mp3", speed=1.5)
    decoded = pyav_decode(run(pipeline, 1.5))
    assert decoded.rate == 24000 and decoded.channels == 1
    assert 0.97 <= decoded.seconds <= 1.15
    assert pipeline.seconds == pytest.approx(1.0, abs=0.04)
    assert abs(dominant_frequency(decoded.samples, 24000) - TONE_HZ) < 4


def test_pcm_output_has_one_sample_per_24k_tick():
    pipeline = OutputPipeline(ENGINE_RATE, 24000, "pcm")
    data = run(pipeline, 1.0)
    assert abs(len(data) - 2 * 24000) <= 2 * 4
    assert pipeline.seconds == pytest.approx(len(data) / 2 / 24000)
    pcm = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767
    assert abs(dominant_frequency(pcm, 24000) - TONE_HZ) < 2
    assert pipeline.content_type == "audio/pcm;rate=24000;channels=1"


def test_slow_opus_stream():
    pipeline = OutputPipeline(ENGINE_RATE, 24000, "opus", speed=0.5)
    decoded = pyav_decode(run(pipeline, 0.5))
    assert decoded.seconds == pytest.approx(1.0, abs=0.04)
    assert abs(dominant_frequency(decoded.samples, decoded.rate) - TONE_HZ) < 4


def test_invalid_format_or_rate_is_refused_on_construction():
    with pytest.raises(UnsupportedFormat):
        OutputPipeline(ENGINE_RATE, 24000, "ogg")
    with pytest.raises(UnsupportedSampleRate):
        OutputPipeline(ENGINE_RATE, 44100, "opus")


def test_render_makes_a_complete_wav_at_the_new_speed_and_rate():
    data = render(tone(1.0, ENGINE_RATE), ENGINE_RATE, 24000, "wav", speed=2.0)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getframerate()) == (1, 24000)
        assert w.getnframes() == (len(data) - 44) // 2
        assert abs(w.getnframes() - 12000) < 0.04 * 12000
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32767
    assert abs(dominant_frequency(pcm, 24000) - TONE_HZ) < 4


def test_render_matches_the_streamed_pipeline_for_pcm():
    samples = tone(0.5, ENGINE_RATE)
    streamed = run(OutputPipeline(ENGINE_RATE, 24000, "pcm", speed=1.25), 0.5)
    assert render(samples, ENGINE_RATE, 24000, "pcm", speed=1.25) == streamed


def test_a_whole_pipeline_makes_one_complete_file_at_the_end():
    pipeline = OutputPipeline(ENGINE_RATE, 24000, "flac", speed=1.5, whole=True)
    assert all(pipeline.push(c) == b"" for c in chunks(tone(1.5, ENGINE_RATE), 7680))
    data = pipeline.finish()
    assert soundfile.info(io.BytesIO(data)).frames == round(pipeline.seconds * 24000)
    assert pipeline.seconds == pytest.approx(1.0, abs=0.04)


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("fmt", ["mp3", "flac", "wav"])
def test_closing_a_pipeline_mid_stream_gives_back_ffmpegs_threads_at_once(fmt):
    """A stream cut short: its pipeline (still referenced, as a cut stream's frame may keep it) lets go
    of the codec and the filters, and of any thread FFmpeg started for them, when closed."""
    before = threads()
    pipelines = [OutputPipeline(ENGINE_RATE, 24000, fmt, speed=1.25) for _ in range(4)]
    for pipeline in pipelines:
        pipeline.push(tone(0.32, ENGINE_RATE))
    for pipeline in pipelines:
        pipeline.close()
    assert threads() <= before
    with pytest.raises(RuntimeError):
        pipelines[0].push(tone(0.16, ENGINE_RATE))
