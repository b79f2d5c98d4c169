"""Encoding float32 mono PCM into the response formats, incrementally (streams) or whole (files).

Compressed formats go through PyAV. A stream is muxed into a write-only sink, so the muxer treats the
output as non-seekable and every call returns the bytes it produced (MP3 frames, Ogg pages, ADTS
frames, FLAC frames); a whole file is muxed into a seekable buffer, so the muxer completes its header
at the end. WAV and raw PCM are written directly: a streamed WAV carries a header whose sizes are
0xFFFFFFFF ("unknown"), a complete one carries the real sizes.
"""

from __future__ import annotations

import contextlib
import io
import struct
import weakref
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

    def finish(self) -> None:
        """Flush the codec and write the container's trailer (and, into a seekable file, its header's
        final sizes)."""
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()

    def close(self) -> None:
        """Close the container without flushing the codec (a stream cut short). Until it is closed, a
        PyAV container and its stream hold each other: dropped unclosed, the codec, its buffers and
        the threads of the format converter it encodes through wait for a full garbage collection."""
        with contextlib.suppress(av.FFmpegError, OSError):
            self.container.close()


class StreamEncoder:
    """Encodes one response incrementally: `encode` per chunk, then `finish` once; `close` releases it.

    Each call returns the bytes that became ready (possibly none: codecs buffer a frame or two),
    so a streamed HTTP response can send them at once. With `whole`, the output is one complete file
    instead: `encode` keeps everything and `finish` returns the file, whose header the muxer completes
    once the length is known (FLAC STREAMINFO's sample count and MD5, MP3's Xing frame, WAV's sizes),
    as a player or libsndfile reading a file (not a stream) expects.

    `finish` closes the encoder; `close` alone (a stream cut short) drops it without flushing. Every
    encoder is counted by `open_encoders` until closed. Not thread-safe; one response per encoder.
    """

    def __init__(self, fmt: str | AudioFormat, sample_rate: int, *, whole: bool = False) -> None:
        self.format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
        self.sample_rate = self.format.check_rate(sample_rate)
        self.whole = whole
        # A seekable file lets the muxer go back to the header at the end; the sink is a stream.
        self._file: io.BytesIO | _Sink = io.BytesIO() if whole else _Sink()
        self._writer = _PyAVWriter(self.format, sample_rate, self._file) if self.format.codec else None
        # An encoder dropped without `close` still closes its container when it goes.
        self._release = weakref.finalize(self, self._writer.close) if self._writer is not None else None
        self._pcm: list[bytes] = []  # a whole WAV or PCM file's samples, until its header can be written
        self._header_sent = False
        self._finished = False
        _OPEN.add(self)

    def encode(self, samples: np.ndarray) -> bytes:
        """Encode a chunk of mono float32 samples; return the bytes produced so far."""
        if self._finished:
            raise RuntimeError("StreamEncoder.encode called after finish() or close()")
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._writer is not None:
            self._writer.write(samples)
            return self._drain()
        if self.whole:
            self._pcm.append(to_s16le(samples))
            return b""
        return self._wav_header() + to_s16le(samples)

    def finish(self) -> bytes:
        """Flush the codec and container; return the final bytes (with `whole`, the whole file). Further
        calls return b""."""
        if self._finished:
            return b""
        try:
            if self._writer is not None:
                self._writer.finish()
                if isinstance(self._file, io.BytesIO):
                    return self._file.getvalue()
                return self._file.drain()
            if self.whole:
                data = b"".join(self._pcm)
                header = wav_header(self.sample_rate, len(data) // 2) if self.format.name == "wav" else b""
                return header + data
            return self._wav_header()
        finally:
            self.close()

    def close(self) -> None:
        """Release the codec, the container and what they buffered, without flushing (idempotent)."""
        self._finished = True
        _OPEN.discard(self)
        if self._release is not None:
            self._release()
        # Dropped too, so an encoder still referenced (a cut stream's frame in a reference cycle)
        # holds no FFmpeg object and no audio.
        self._writer = None
        self._file = _Sink()
        self._pcm = []

    def _drain(self) -> bytes:
        return b"" if isinstance(self._file, io.BytesIO) else self._file.drain()

    def _wav_header(self) -> bytes:
        if self._header_sent or self.format.name != "wav":
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)


# Encoders not yet closed (weakly: one collected without `close` leaves on its own).
_OPEN: weakref.WeakSet[StreamEncoder] = weakref.WeakSet()


def open_encoders() -> int:
    """Encoders of this process not yet finished or closed (each holds a codec, a container and
    what they buffer): the responses being encoded now."""
    return len(_OPEN)


def encode_audio(samples: np.ndarray, sample_rate: int, fmt: str | AudioFormat) -> bytes:
    """Encode a whole utterance into a complete file (exact headers and sizes)."""
    encoder = StreamEncoder(fmt, sample_rate, whole=True)
    encoder.encode(samples)
    return encoder.finish()
