import io
import struct
import wave

import numpy as np
import pytest
import soundfile

from polyvox.audio import StreamEncoder, UnsupportedSampleRate, encode_audio
from polyvox.audio.encode import open_encoders

from .signals import TONE_HZ, chunks, dominant_frequency, pyav_decode, tone

RATE = 24000
CHUNK = int(0.16 * RATE)
CODECS = {"mp3": "mp3float", "opus": "opus", "aac": "aac", "flac": "flac", "wav": "pcm_s16le"}
# encoder delay and frame padding a decoder may keep (mp3: 1152-sample frames, aac: 1024 priming)
PADDING_S = {"mp3": 0.12, "opus": 0.03, "aac": 0.12, "flac": 0.0, "wav": 0.0}


def check_decodes_to_tone(data: bytes, fmt: str, rate: int, seconds: float) -> None:
    decoded = pyav_decode(data)
    assert decoded.codec == CODECS[fmt]
    assert decoded.channels == 1
    if fmt == "opus":  # ffmpeg decodes opus at 48 kHz; the stream's own rate is in its OpusHead
        assert decoded.rate == 48000
        head = data.index(b"OpusHead")
        assert struct.unpack_from("<I", data, head + 12)[0] == rate
    else:
        assert decoded.rate == rate
    assert seconds - 0.005 <= decoded.seconds <= seconds + PADDING_S[fmt] + 0.005
    assert abs(dominant_frequency(decoded.samples, decoded.rate) - TONE_HZ) < 3


@pytest.mark.parametrize("fmt", list(CODECS))
def test_whole_file_decodes_to_the_same_tone(fmt):
    check_decodes_to_tone(encode_audio(tone(1.0, RATE), RATE, fmt), fmt, RATE, 1.0)


@pytest.mark.parametrize("fmt", list(CODECS))
def test_streamed_in_160ms_chunks_decodes_to_the_same_tone(fmt):
    encoder = StreamEncoder(fmt, RATE)
    parts = [encoder.encode(c) for c in chunks(tone(1.0, RATE), CHUNK)]
    tail = encoder.finish()
    # audio leaves the encoder while the stream goes on, not only at the end
    assert sum(1 for p in parts if p) >= 3
    check_decodes_to_tone(b"".join(parts) + tail, fmt, RATE, 1.0)


@pytest.mark.parametrize(("fmt", "rate"), [("mp3", 16000), ("opus", 48000), ("aac", 44100), ("flac", 48000)])
def test_other_rates_are_encoded_at_that_rate(fmt, rate):
    encoder = StreamEncoder(fmt, rate)
    data = b"".join(encoder.encode(c) for c in chunks(tone(0.5, rate), int(0.16 * rate))) + encoder.finish()
    check_decodes_to_tone(data, fmt, rate, 0.5)


def test_unsupported_rate_is_refused_before_encoding():
    with pytest.raises(UnsupportedSampleRate):
        StreamEncoder("opus", 44100)


def test_complete_wav_header_has_correct_sizes():
    samples = tone(0.5, RATE)
    data = encode_audio(samples, RATE, "wav")
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert struct.unpack_from("<I", data, 4)[0] == len(data) - 8
    assert struct.unpack_from("<I", data, 40)[0] == 2 * len(samples) == len(data) - 44
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (
            1,
            2,
            RATE,
            len(samples),
        )


def test_streamed_wav_header_declares_unknown_length():
    encoder = StreamEncoder("wav", RATE)
    first = encoder.encode(tone(0.16, RATE))
    assert first[:4] == b"RIFF"
    assert struct.unpack_from("<I", first, 4)[0] == 0xFFFFFFFF
    assert struct.unpack_from("<I", first, 40)[0] == 0xFFFFFFFF
    assert len(first) == 44 + 2 * CHUNK


def test_pcm_is_s16le_mono_24k():
    samples = tone(0.5, RATE)
    data = encode_audio(samples, RATE, "pcm")
    assert len(data) == 2 * len(samples)
    back = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767
    assert np.max(np.abs(back - samples)) < 1e-4


def test_streamed_pcm_equals_whole_pcm():
    samples = tone(0.5, RATE)
    encoder = StreamEncoder("pcm", RATE)
    streamed = b"".join(encoder.encode(c) for c in chunks(samples, CHUNK)) + encoder.finish()
    assert streamed == encode_audio(samples, RATE, "pcm")


def test_out_of_range_samples_are_clamped_not_wrapped():
    data = encode_audio(np.array([2.0, -3.0, 0.5, np.nan], dtype=np.float32), RATE, "pcm")
    assert np.frombuffer(data, dtype="<i2").tolist() == [32767, -32767, 16384, 0]


def test_encode_after_finish_is_an_error():
    encoder = StreamEncoder("mp3", RATE)
    encoder.finish()
    assert encoder.finish() == b""
    with pytest.raises(RuntimeError):
        encoder.encode(tone(0.1, RATE))


@pytest.mark.parametrize(("fmt", "magic"), [("opus", b"OggS"), ("flac", b"fLaC"), ("wav", b"RIFF")])
def test_stream_header_is_ready_before_any_audio(fmt, magic):
    assert StreamEncoder(fmt, RATE).encode(np.zeros(0, dtype=np.float32)).startswith(magic)


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3", "opus"])
def test_a_whole_file_declares_its_length_as_libsndfile_reads_it(fmt):
    """A file, unlike a stream, says how long it is: FLAC's STREAMINFO counts its samples, MP3 carries a
    Xing frame, WAV its sizes; soundfile (libsndfile) reads each whole (a streamed FLAC says 0 samples,
    which libsndfile cannot read)."""
    samples = tone(1.0, RATE)
    encoder = StreamEncoder(fmt, RATE, whole=True)
    assert all(encoder.encode(c) == b"" for c in chunks(samples, CHUNK))  # nothing before the end
    data = encoder.finish()
    declared = soundfile.info(io.BytesIO(data)).frames
    read, rate = soundfile.read(io.BytesIO(data), dtype="float32")
    assert rate == RATE and read.ndim == 1 and read.size == declared
    if fmt in ("wav", "flac"):
        assert declared == samples.size
        assert np.max(np.abs(read - samples)) < 1e-4  # lossless: the samples themselves
    else:
        assert samples.size <= declared <= samples.size + PADDING_S[fmt] * RATE
        assert abs(dominant_frequency(read, RATE) - TONE_HZ) < 3


def test_encode_audio_is_a_whole_file():
    assert soundfile.info(io.BytesIO(encode_audio(tone(0.5, RATE), RATE, "flac"))).frames == RATE // 2


def test_an_encoder_counts_as_open_until_finished_closed_or_dropped():
    before = open_encoders()
    finished, closed, dropped = (StreamEncoder("flac", RATE) for _ in range(3))
    for encoder in (finished, closed, dropped):
        encoder.encode(tone(0.16, RATE))
    assert open_encoders() == before + 3
    finished.finish()
    closed.close()
    del dropped, encoder  # never closed: its container is closed as it goes
    assert open_encoders() == before
    with pytest.raises(RuntimeError):
        closed.encode(tone(0.1, RATE))
    assert closed.finish() == b""
