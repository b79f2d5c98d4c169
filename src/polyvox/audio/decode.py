"""Decoding uploaded audio (any container and codec ffmpeg reads) into mono float32 at a chosen rate."""

from __future__ import annotations

import io

import av
import numpy as np

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
    resampler = av.AudioResampler(format="flt", layout="mono", rate=target_rate)
    limit = None if max_seconds is None else int(max_seconds * target_rate) + 1
    parts: list[np.ndarray] = []
    total = 0
    try:
        for frame in container.decode(container.streams.audio[0]):
            for out in resampler.resample(frame):
                parts.append(out.to_ndarray().reshape(-1))
                total += out.samples
            if limit is not None and total > limit:
                break
        else:
            parts.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(None))
    except (av.FFmpegError, ValueError) as exc:  # ValueError: the stream changed layout or rate midway
        raise AudioDecodeError(f"The audio could not be decoded: {_reason(exc)}.") from exc
    finally:
        container.close()
    samples = np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, np.float32)
    if samples.size == 0:
        raise AudioDecodeError("The file contains no audio samples.")
    if limit is not None and samples.size > limit:
        raise AudioDecodeError(f"The audio is longer than the allowed {max_seconds:g} seconds.")
    return samples


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
