"""Test signals and independent measurements (plain PyAV and numpy, not the code under test)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

TONE_HZ = 440.0
SECOND_TONE_HZ = 1250.0


def tone(seconds: float, rate: int) -> np.ndarray:
    """A 440 Hz sine plus a quieter 1250 Hz one, float32 mono."""
    t = np.arange(int(round(seconds * rate))) / rate
    x = 0.5 * np.sin(2 * np.pi * TONE_HZ * t) + 0.15 * np.sin(2 * np.pi * SECOND_TONE_HZ * t)
    return x.astype(np.float32)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    """Frequency of the strongest spectral peak (Hann window, 4x zero padding)."""
    x = np.asarray(samples, dtype=np.float64)
    n = 4 * len(x)
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x)), n=n))
    return float(np.argmax(spectrum) * rate / n)


def chunks(samples: np.ndarray, size: int):
    for i in range(0, len(samples), size):
        yield samples[i : i + size]


@dataclass
class Decoded:
    codec: str
    rate: int
    channels: int
    samples: np.ndarray

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


def first_channel(frame: av.AudioFrame) -> np.ndarray:
    data = frame.to_ndarray()
    channels = frame.layout.nb_channels
    return data.reshape(channels, -1)[0] if frame.format.is_planar else data.reshape(-1, channels)[:, 0]


def pyav_decode(data: bytes) -> Decoded:
    """Decode a file with PyAV directly: codec name, stream rate, channel count, first-channel samples."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        ctx = stream.codec_context
        parts = [first_channel(f) for f in container.decode(stream)]
        samples = np.concatenate(parts).astype(np.float64)
        if np.issubdtype(parts[0].dtype, np.integer):
            samples /= np.iinfo(parts[0].dtype).max
        return Decoded(ctx.name, stream.rate, ctx.channels, samples)
