"""Test clips written with the standard library and plain PyAV (not polyvox's audio code)."""

from __future__ import annotations

import base64

import numpy as np

from helpers.clips import pyav_file, wav_bytes


def voice_like(seconds: float, rate: int = 24000, pitch: float = 180.0) -> np.ndarray:
    """A harmonic tone with vibrato and a syllable-rate envelope: voiced, never silent."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * pitch * t + 3.0 * np.sin(2 * np.pi * 5.0 * t)
    x = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t) ** 2
    return (0.25 * x * envelope).astype(np.float32)


def wav_clip(seconds: float = 1.5, pitch: float = 180.0, rate: int = 24000) -> bytes:
    return wav_bytes(voice_like(seconds, rate, pitch), rate)


def flac_clip(seconds: float = 1.5, pitch: float = 180.0, rate: int = 24000) -> bytes:
    pcm = (voice_like(seconds, rate, pitch) * 32767).astype(np.int16).reshape(1, -1)
    return pyav_file(pcm, rate, "flac", "flac", "mono", "s16")


def data_url(data: bytes, mime: str = "audio/wav") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"
