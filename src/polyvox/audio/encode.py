"""Encoding float32 mono PCM into the response formats, incrementally (streams) or whole (files).

Compressed formats go through PyAV into a write-only sink, so the muxer treats the output as a
non-seekable stream and every call returns the bytes it produced (MP3 frames, Ogg pages, ADTS
frames, FLAC frames). WAV and raw PCM are written directly: a streamed WAV carries a header whose
sizes are 0xFFFFFFFF ("unknown"), a complete one carries the real sizes.
"""

from __future__ import annotations

import io
import struct
from typing import cast

import av
import numpy as np
from av.audio.stream import AudioStream

from polyvox.audio.formats import AudioFormat, get_format

_UNKNOWN_SIZE = 0xFFFFFFFF


def clamp(samples: np.ndarray) -> np.ndarray:
    """Mono float32 samples limited to [-1, 1]; NaN becomes silence."""
    samples = np.nan_to_num(np.asarray(samples, dtype=np.float32).reshape(-1), nan=0.0)
    return np.clip(samples, -1.0, 1.0)


def to_s16le(samples: np.ndarray) -> bytes:
    """Clamp float samples to [-1, 1] and return them as signed 16-bit little-endian bytes."""
    return np.round(clamp(samples) * 32767.0).astype("<i2").tobytes()


def wav_header(sample_rate: int, num_samples: int | None = None) -> bytes:
    """A 44-byte mono 16-bit WAV header; `num_samples` None writes the streaming "unknown" sizes."""
    if num_samples is None:
        data_size = riff_size = _UNKNOWN_SIZE
    else:
        data_size = 2 * num_samples
        riff_size = 36 + data_size
    return (
        struct.pack("<4sI4s", b"RIFF", riff_size, b"WAVE")
        + struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16)
        + struct.pack("<4sI", b"data", data_size)
    )


class _Sink:
    """A write-only file object: PyAV muxes into it, the encoder drains what was written."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class _PyAVWriter:
    """One PyAV output container with one mono audio stream, fed float32 frames."""

    def __init__(self, fmt: AudioFormat, sample_rate: int, file: object) -> None:
        self.sample_rate = sample_rate
        self.container = av.open(file, "w", format=fmt.container, container_options=fmt.container_options)
        assert fmt.codec is not None  # the PCM formats (no codec) are written without PyAV
        self.stream = cast(AudioStream, self.container.add_stream(fmt.codec, rate=sample_rate))
        self.stream.layout = "mono"
        if fmt.bit_rate is not None:
            self.stream.bit_rate = fmt.bit_rate
        self.container.start_encoding()
        self._pts = 0

    def write(self, samples: np.ndarray) -> None:
        if samples.size == 0:
            return
        frame = av.AudioFrame.from_ndarray(clamp(samples).reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = self.sample_rate
        frame.pts = self._pts
        self._pts += frame.samples
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()


class StreamEncoder:
    """Encodes one response incrementally: `encode` per chunk, then `finish` once.

    Each call returns the bytes that became ready (possibly none: codecs buffer a frame or two),
    so a streamed HTTP response can send them at once. Not thread-safe; one response per encoder.
    """

    def __init__(self, fmt: str | AudioFormat, sample_rate: int) -> None:
        self.format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
        self.sample_rate = self.format.check_rate(sample_rate)
        self._sink = _Sink()
        self._writer = _PyAVWriter(self.format, sample_rate, self._sink) if self.format.codec else None
        self._header_sent = False
        self._finished = False

    def encode(self, samples: np.ndarray) -> bytes:
        """Encode a chunk of mono float32 samples; return the bytes produced so far."""
        if self._finished:
            raise RuntimeError("StreamEncoder.encode called after finish()")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._writer is not None:
            self._writer.write(samples)
            return self._sink.drain()
        return self._wav_header() + to_s16le(samples)

    def finish(self) -> bytes:
        """Flush the codec and container; return the final bytes. Further calls return b""."""
        if self._finished:
            return b""
        self._finished = True
        if self._writer is not None:
            self._writer.close()
            return self._sink.drain()
        return self._wav_header()

    def _wav_header(self) -> bytes:
        if self._header_sent or self.format.name != "wav":
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str | AudioFormat) -> bytes:
    """Encode a whole utterance into a complete file (seekable output: exact headers and sizes)."""
    audio_format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
    audio_format.check_rate(sample_rate)
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if audio_format.name == "pcm":
        return to_s16le(samples)
    if audio_format.name == "wav":
        return wav_header(sample_rate, samples.size) + to_s16le(samples)
    buffer = io.BytesIO()
    writer = _PyAVWriter(audio_format, sample_rate, buffer)
    writer.write(samples)
    writer.close()
    return buffer.getvalue()


def complete_file(data: bytes, fmt: AudioFormat, sample_rate: int) -> bytes:
    """A whole stream-encoded file made exact: WAV gets its real sizes instead of the streaming ones."""
    if fmt.name == "wav" and len(data) >= 44:
        return wav_header(sample_rate, (len(data) - 44) // 2) + data[44:]
    return data
