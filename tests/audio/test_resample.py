import numpy as np

from polyvox.audio import Resampler

from .signals import TONE_HZ, chunks, dominant_frequency, tone


def resample_streamed(samples, in_rate, out_rate, chunk_s=0.16):
    resampler = Resampler(in_rate, out_rate)
    parts = [resampler.process(c) for c in chunks(samples, int(chunk_s * in_rate))]
    return np.concatenate([*parts, resampler.flush()])


def test_downsampling_keeps_the_tone_and_the_duration():
    out = resample_streamed(tone(1.0, 48000), 48000, 24000)
    assert abs(len(out) - 24000) <= 4
    assert abs(dominant_frequency(out, 24000) - TONE_HZ) < 2


def test_upsampling_keeps_the_tone_and_the_duration():
    out = resample_streamed(tone(1.0, 16000), 16000, 44100)
    assert abs(len(out) - 44100) <= 4
    assert abs(dominant_frequency(out, 44100) - TONE_HZ) < 2


def test_streamed_output_has_no_seams():
    # a smooth input resampled in chunks stays smooth: no jump larger than the sine's own slope
    out = resample_streamed(tone(1.0, 48000), 48000, 24000, chunk_s=0.01)
    steady = out[100:-100]
    max_step = 2 * np.pi * (0.5 * 440 + 0.15 * 1250) / 24000
    assert np.max(np.abs(np.diff(steady))) < 1.03 * max_step


def test_same_rate_is_the_identity():
    samples = tone(0.2, 24000)
    resampler = Resampler(24000, 24000)
    assert np.array_equal(resampler.process(samples), samples)
    assert resampler.flush().size == 0
