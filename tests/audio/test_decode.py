import numpy as np
import pytest

from helpers.clips import pyav_file
from polyvox.audio import AudioDecodeError, audio_duration, decode_audio, encode_audio

from .signals import TONE_HZ, dominant_frequency, tone


def stereo_wav_44k(seconds: float) -> bytes:
    """A stereo 44.1 kHz WAV written by PyAV: the tone on the left, silence on the right."""
    rate = 44100
    left = tone(seconds, rate)
    planes = np.stack([left, np.zeros_like(left)])
    return pyav_file(planes, rate, "wav", "pcm_s16le", "stereo", "fltp")


def test_stereo_44k_is_downmixed_and_resampled():
    samples = decode_audio(stereo_wav_44k(1.0), 16000)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 16000) <= 16
    assert abs(dominant_frequency(samples, 16000) - TONE_HZ) < 3
    assert 0.05 < np.max(np.abs(samples)) < 1.0


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac"])
def test_compressed_formats_decode(fmt):
    samples = decode_audio(encode_audio(tone(1.0, 24000), 24000, fmt), 16000)
    assert 16000 - 16 <= len(samples) <= 16000 + 0.12 * 16000
    assert abs(dominant_frequency(samples, 16000) - TONE_HZ) < 3


@pytest.mark.parametrize(
    "data",
    [b"", b"this is plainly not an audio file\n" * 40, np.random.default_rng(7).bytes(4096), b"RIFF\x00\x00"],
    ids=["empty", "text", "random", "truncated-wav"],
)
def test_garbage_raises_audio_decode_error(data):
    with pytest.raises(AudioDecodeError) as info:
        decode_audio(data, 16000)
    assert isinstance(info.value, ValueError)
    assert str(info.value)


def test_too_long_audio_is_refused():
    with pytest.raises(AudioDecodeError, match="longer than"):
        decode_audio(encode_audio(tone(2.0, 24000), 24000, "flac"), 16000, max_seconds=1.0)


def test_duration_of_a_file():
    assert audio_duration(encode_audio(tone(1.5, 24000), 24000, "flac")) == pytest.approx(1.5)
    assert audio_duration(stereo_wav_44k(0.75)) == pytest.approx(0.75)


@pytest.mark.parametrize("fmt", ["wav", "flac"])
@pytest.mark.parametrize("rate", [44100, 48000, 22050, 8000])
def test_clips_decode_to_what_librosa_load_gives_the_official_code(tmp_path, fmt, rate):
    """The official VoxCPM2 reads a reference with `librosa.load(path, sr=16000, mono=True)`."""
    librosa = pytest.importorskip("librosa")
    seconds = 1.3
    t = np.arange(int(seconds * rate)) / rate
    noise = np.random.default_rng(rate).standard_normal((2, t.size))
    planes = np.stack([0.4 * np.sin(2 * np.pi * 300 * t), 0.2 * np.sin(2 * np.pi * 510 * t)]) + 0.05 * noise
    pcm = (planes * 32767).astype(np.int16)
    codec = "pcm_s16le" if fmt == "wav" else "flac"
    data = pyav_file(pcm, rate, fmt, codec, "stereo", "s16p")
    path = tmp_path / f"clip.{fmt}"
    path.write_bytes(data)
    expected, _ = librosa.load(path, sr=16000, mono=True)
    got = decode_audio(data, 16000)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-6
