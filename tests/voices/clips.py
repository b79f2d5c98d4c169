"""Test clips written with the standard library and plain PyAV (not polyvox's audio code)."""

from __future__ import annotations

import base64
import io
import wave

import av
import numpy as np


def voice_like(seconds: float, rate: int = 24000, pitch: float = 180.0) -> np.ndarray:
    """A harmonic tone with vibrato and a syllable-rate envelope: voiced, never silent."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * pitch * t + 3.0 * np.sin(2 * np.pi * 5.0 * t)
    x = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t) ** 2
    return (0.25 * x * envelope).astype(np.float32)


def wav_bytes(samples: np.ndarray, rate: int = 24000) -> bytes:
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def wav_clip(seconds: float = 1.5, pitch: float = 180.0, rate: int = 24000) -> bytes:
    return wav_bytes(voice_like(seconds, rate, pitch), rate)


def flac_clip(seconds: float = 1.5, pitch: float = 180.0, rate: int = 24000) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="flac") as container:
        stream = container.add_stream("flac", rate=rate, layout="mono")
        pcm = (voice_like(seconds, rate, pitch) * 32767).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def data_url(data: bytes, mime: str = "audio/wav") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
