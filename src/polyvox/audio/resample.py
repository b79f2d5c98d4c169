"""Sample-rate conversion of mono float32 audio: `Resampler` streams a response's audio through
ffmpeg's swresample (an `aformat` filter chain, as PyAV's own AudioResampler builds, but run on the
calling thread); `resample_clip` converts a whole voice clip with soxr, as the official
VoxCPM2 code does (through `librosa.load`), so a clone reference gives the model the same samples."""

from __future__ import annotations

import math

import av
import av.filter
import numpy as np
import soxr

from polyvox.audio.graph import filter_chain, pull_ready


def resample_clip(samples: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    """A whole clip at `target_rate`: soxr at high quality, `ceil(n * ratio)` samples long (librosa's
    `resample` with `fix=True`). Every voice clip changes rate here, whichever path brings it."""
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if rate == target_rate:
        return samples
    out = soxr.resample(samples, rate, target_rate, quality="soxr_hq")
    length = math.ceil(samples.size * target_rate / rate)
    if out.size < length:
        out = np.pad(out, (0, length - out.size))
    return np.ascontiguousarray(out[:length], dtype=np.float32)


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
    `flush` returns the tail it still holds and readies it for a new stream. `close` drops the filter
    and what it holds (a stream cut short); the next chunk would start a new stream.
    """

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._graph: av.filter.Graph | None = None  # built at a stream's first chunk
        self._pts = 0

    def process(self, chunk: np.ndarray) -> np.ndarray:
        chunk = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if self.in_rate == self.out_rate or chunk.size == 0:
            return chunk
        if self._graph is None:
            rate = {"sample_rates": str(self.out_rate), "sample_fmts": "flt", "channel_layouts": "mono"}
            self._graph = filter_chain(self.in_rate, [("aformat", rate)])
        self._graph.push(to_frame(chunk, self.in_rate, self._pts))
        self._pts += chunk.size
        return frames_to_array(pull_ready(self._graph))

    def flush(self) -> np.ndarray:
        if self._graph is None:
            return np.zeros(0, dtype=np.float32)
        self._graph.push(None)
        tail = frames_to_array(pull_ready(self._graph))
        self.close()
        return tail

    def close(self) -> None:
        self._graph = None
        self._pts = 0
