"""Decoding uploaded audio (any container and codec ffmpeg reads) into mono float32 at a chosen rate.

Channels are averaged and the rate changed with soxr at high quality — what the official VoxCPM2
code gets from `librosa.load`, so a clone reference at any rate gives it the same samples."""

from __future__ import annotations

import io
import math

import av
import numpy as np
import soxr

from polyvox.audio.errors import AudioDecodeError


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _open(data: bytes) -> av.container.InputContainer:
    if not data:
        raise AudioDecodeError("The audio file is empty.")
    try:
        container = av.open(io.BytesIO(data), "r")
    except (av.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        raise AudioDecodeError(f"The file is not audio that can be decoded: {_reason(exc)}.") from exc
    if not container.streams.audio:
        container.close()
        raise AudioDecodeError("The file contains no audio stream.")
    return container


def decode_audio(data: bytes, target_rate: int, max_seconds: float | None = None) -> np.ndarray:
    """Decode `data` to mono float32 samples at `target_rate`, downmixing and resampling as needed.

    Raises AudioDecodeError for bytes that are not audio, audio with no samples, or audio longer
    than `max_seconds`.
    """
    container = _open(data)
    frames: list[np.ndarray] = []
    total = rate = 0
    limit = None
    try:
        converter = None
        for frame in container.decode(container.streams.audio[0]):
            if converter is None:  # every frame in the first frame's layout and rate, as float
                rate = frame.sample_rate
                converter = av.AudioResampler(format="flt", layout=frame.layout.name, rate=rate)
                channels = len(frame.layout.channels)
                limit = None if max_seconds is None else int(max_seconds * rate) + 1
            for out in converter.resample(frame):
                frames.append(out.to_ndarray().reshape(-1, channels))
                total += out.samples
            if limit is not None and total > limit:
                break
        else:
            if converter is not None:
                frames.extend(out.to_ndarray().reshape(-1, channels) for out in converter.resample(None))
    except (av.FFmpegError, ValueError) as exc:  # ValueError: a stream PyAV cannot convert
        raise AudioDecodeError(f"The audio could not be decoded: {_reason(exc)}.") from exc
    finally:
        container.close()
    samples = np.concatenate(frames) if frames else np.zeros((0, 1), np.float32)
    if samples.shape[0] == 0:
        raise AudioDecodeError("The file contains no audio samples.")
    if limit is not None and samples.shape[0] > limit:
        raise AudioDecodeError(f"The audio is longer than the allowed {max_seconds:g} seconds.")
    mono = samples.mean(axis=1, dtype=np.float32) if samples.shape[1] > 1 else samples[:, 0]
    return _resample(np.ascontiguousarray(mono, dtype=np.float32), rate, target_rate)


def _resample(samples: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """soxr at high quality, `ceil(n * ratio)` samples long (librosa's `resample` with `fix=True`)."""
    if rate == target_rate:
        return samples
    out = soxr.resample(samples, rate, target_rate, quality="soxr_hq")
    length = math.ceil(samples.size * target_rate / rate)
    if out.size < length:
        out = np.pad(out, (0, length - out.size))
    return np.ascontiguousarray(out[:length], dtype=np.float32)


def audio_duration(data: bytes) -> float:
    """Duration in seconds of the first audio stream, counted from its decoded samples."""
    container = _open(data)
    stream = container.streams.audio[0]
    samples = 0
    rate = 0
    try:
        for frame in container.decode(stream):
            samples += frame.samples
            rate = frame.sample_rate
    except av.FFmpegError as exc:
        raise AudioDecodeError(f"The audio could not be decoded: {_reason(exc)}.") from exc
    finally:
        container.close()
    if rate == 0:
        raise AudioDecodeError("The file contains no audio samples.")
    return samples / rate
