"""Decoding responses in tests with PyAV directly, independently of polyvox's own audio code."""

from __future__ import annotations

import io

import av
import numpy as np


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """All samples of the first audio stream, downmixed to mono float32, and the stream's sample rate."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        mono = av.AudioResampler(format="flt", layout="mono", rate=rate)
        parts = [
            out.to_ndarray().reshape(-1) for frame in container.decode(stream) for out in mono.resample(frame)
        ]
        parts += [out.to_ndarray().reshape(-1) for out in mono.resample(None)]
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), rate


def pcm_samples(data: bytes) -> np.ndarray:
    """Headerless signed 16-bit little-endian PCM as float32."""
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def duration(data: bytes, fmt: str, pcm_rate: int = 24000) -> float:
    """Seconds of audio in a response body of format `fmt`."""
    if fmt == "pcm":
        return len(data) / 2 / pcm_rate
    samples, rate = decode(data)
    return samples.size / rate


def opus_input_rate(data: bytes) -> int:
    """The input sample rate an Ogg Opus file declares in its OpusHead (decoders always output 48 kHz)."""
    head = data.index(b"OpusHead")
    return int.from_bytes(data[head + 12 : head + 16], "little")
