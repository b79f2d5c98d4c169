"""Audio files for tests, written with the standard library and plain PyAV (never polyvox's own
audio code), so what polyvox decodes was not made by polyvox."""

from __future__ import annotations

import io
import wave

import av
import numpy as np


def wav_bytes(samples: np.ndarray, rate: int = 24000) -> bytes:
    """Mono 16-bit PCM WAV of float `samples` (clipped to [-1, 1]), written by the `wave` module."""
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def pyav_file(
    samples: np.ndarray, rate: int, container: str, codec: str, layout: str, sample_format: str
) -> bytes:
    """A whole file of `container` format holding `samples` (one PyAV frame in `sample_format`, shaped
    as PyAV wants it: planes for planar formats, one interleaved row otherwise) encoded by `codec`."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as output:
        stream = output.add_stream(codec, rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(samples, format=sample_format, layout=layout)
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return buffer.getvalue()
