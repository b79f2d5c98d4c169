"""Decoding an untrusted clip is bounded: a file stating a length over the limit is refused before a
sample is decoded, one that hides its length is decoded only up to the limit, a small file cannot
decode into more samples than its size allows, and NaN or infinity is refused."""

from __future__ import annotations

import numpy as np
import pytest

from polyvox.audio.decode import MAX_SAMPLES_PER_BYTE, MAX_SAMPLES_PER_SECOND, decode_audio
from polyvox.audio.errors import AudioDecodeError, AudioDecodeStopped, AudioTooLong

from .hostile_clips import FLAC_BLOCK, dense_silent_flac, float_wav, long_silent_flac, multichannel_wav
from .signals import tone


def test_a_flac_stating_53_hours_is_refused_before_decoding():
    data, held = long_silent_flac(53)
    assert len(data) < 2_000_000 and held / 48000 > 52 * 3600
    with pytest.raises(AudioTooLong, match="states 1907") as info:
        decode_audio(data, 16000, max_seconds=60)
    assert info.value.decoded_samples == 0


def test_a_flac_hiding_its_53_hours_is_decoded_only_up_to_the_limit():
    data, held = long_silent_flac(53, state_length=False)
    with pytest.raises(AudioTooLong, match="decoding stopped") as info:
        decode_audio(data, 16000, max_seconds=60)
    limit = 60 * 48000
    assert limit < info.value.decoded_samples <= limit + FLAC_BLOCK  # one block past the limit, of 53 h
    assert info.value.decoded_samples < held / 1000


def test_a_small_file_cannot_decode_into_more_than_its_size_allows():
    data = dense_silent_flac(10)  # 10 s of 192 kHz 7.1: 15 million samples from ~10 kB
    assert 1000 * len(data) < 10 * 192000 * 8
    with pytest.raises(AudioDecodeStopped, match="per byte") as info:
        decode_audio(data, 16000, max_seconds=60)
    assert not isinstance(info.value, AudioTooLong)
    budget = MAX_SAMPLES_PER_BYTE * len(data)
    assert budget < info.value.decoded_samples <= budget + FLAC_BLOCK * 8


def test_many_channels_at_a_high_rate_are_bounded_even_when_uncompressed():
    data = multichannel_wav(0.9, 96000, 8)  # shorter than the limit, but 8 x 96 kHz
    with pytest.raises(AudioDecodeStopped, match="192 kHz stereo") as info:
        decode_audio(data, 16000, max_seconds=1.0)
    assert MAX_SAMPLES_PER_SECOND < info.value.decoded_samples < 0.9 * 96000 * 8
    assert decode_audio(data, 16000, max_seconds=2.0).size == pytest.approx(0.9 * 16000, abs=2)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_samples_are_refused(value):
    samples = tone(1.5, 24000).astype(np.float64)
    samples[20000] = value
    with pytest.raises(AudioDecodeError, match="not finite"):
        decode_audio(float_wav(samples), 16000, max_seconds=60)


def test_float64_samples_beyond_float32_are_refused():
    samples = tone(1.5, 24000).astype(np.float64)
    samples[100:200] = 1e300
    with pytest.raises(AudioDecodeError, match="not finite"):
        decode_audio(float_wav(samples, dtype="<f8"), 16000)


def test_a_finite_float_wav_decodes():
    samples = decode_audio(float_wav(tone(1.5, 24000)), 16000, max_seconds=60)
    assert samples.size == 24000 and np.isfinite(samples).all() and 0.5 < np.abs(samples).max() < 0.7
