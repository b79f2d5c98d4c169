"""Streaming sample-rate conversion of mono float32 audio (ffmpeg's swresample through PyAV)."""

from __future__ import annotations

import av
import numpy as np


def to_frame(samples: np.ndarray, sample_rate: int, pts: int | None = None) -> av.AudioFrame:
    """Wrap mono float32 samples in a PyAV frame."""
    data = np.ascontiguousarray(np.asarray(samples, dtype=np.float32).reshape(1, -1))
    frame = av.AudioFrame.from_ndarray(data, format="flt", layout="mono")
    frame.sample_rate = sample_rate
    frame.pts = pts
    return frame


def frames_to_array(frames: list[av.AudioFrame]) -> np.ndarray:
    """Concatenate mono float frames into one float32 array."""
    if not frames:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.float32, copy=False)


class Resampler:
    """Converts a stream of chunks from `in_rate` to `out_rate`; the identity when they match.

    The filter keeps a few samples of history between calls, so chunk boundaries leave no seams;
    `flush` returns the tail it still holds and readies it for a new stream.
    """

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._resampler = (
            None if in_rate == out_rate else av.AudioResampler(format="flt", layout="mono", rate=out_rate)
        )

    def process(self, chunk: np.ndarray) -> np.ndarray:
        chunk = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if self._resampler is None or chunk.size == 0:
            return chunk
        return frames_to_array(self._resampler.resample(to_frame(chunk, self.in_rate)))

    def flush(self) -> np.ndarray:
        if self._resampler is None:
            return np.zeros(0, dtype=np.float32)
        frames = self._resampler.resample(None)
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=self.out_rate)
        return frames_to_array(frames)
