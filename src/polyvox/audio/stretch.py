"""Streaming pitch-preserving time-stretch (ffmpeg's `atempo` in a filter chain, `audio/graph.py`), and
the tempo-preserving pitch shift that rides in the same chain (its filters: `audio/pitch.py`)."""

from __future__ import annotations

import av.filter
import numpy as np

from polyvox.audio.graph import filter_chain, pull_ready
from polyvox.audio.pitch import pitch_filters
from polyvox.audio.resample import frames_to_array, to_frame

MIN_SPEED = 0.25
MAX_SPEED = 4.0
_STAGE_MIN = 0.5
_STAGE_MAX = 2.0
# atempo emits a frame only once it can fill one as long as the input frame (scaled by the speed), so
# a whole 160 ms chunk would come out a chunk late; 20 ms frames keep the delay to its own window.
_FRAME_S = 0.02
# At the end atempo keeps the last part of its window (about 25 ms of output at half speed): silence
# pushed after the stream carries the real tail out, and the output is cut to the length the speed asks.
_TAIL_PAD_S = 0.1


def atempo_stages(speed: float) -> list[float]:
    """Split `speed` into a product of factors each within atempo's clean range [0.5, 2.0]."""
    stages: list[float] = []
    while speed < _STAGE_MIN:
        stages.append(_STAGE_MIN)
        speed /= _STAGE_MIN
    while speed > _STAGE_MAX:
        stages.append(_STAGE_MAX)
        speed /= _STAGE_MAX
    stages.append(speed)
    return stages


class TimeStretcher:
    """Plays a stream of chunks `speed` times faster (speed > 1 shortens) without changing pitch, and
    `pitch` semitones higher (negative: lower) without changing tempo.

    The identity at speed 1.0 and pitch 0. `flush` ends the stream, returns what the filter still holds
    (the whole stream is then the input's length divided by the speed) and readies it for a new one;
    `close` drops the filter and what it holds (a stream cut short).
    """

    def __init__(self, sample_rate: int, speed: float, pitch: float = 0.0) -> None:
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed}")
        self.sample_rate = sample_rate
        self.speed = speed
        self.pitch = pitch
        shift, faster = pitch_filters(sample_rate, pitch)
        self._filters = shift + [("atempo", {"tempo": f"{f:.6f}"}) for f in atempo_stages(speed / faster)]
        self._graph: av.filter.Graph | None = None  # built at a stream's first chunk
        self._pts = 0  # samples in
        self._out = 0  # samples out

    def process(self, chunk: np.ndarray) -> np.ndarray:
        chunk = np.asarray(chunk, dtype=np.float32).reshape(-1)
        if (self.speed == 1.0 and self.pitch == 0) or chunk.size == 0:
            return chunk
        if self._graph is None:
            self._graph = filter_chain(self.sample_rate, self._filters)
        step = max(1, round(_FRAME_S * self.sample_rate))
        frames = []
        for start in range(0, chunk.size, step):
            self._graph.push(to_frame(chunk[start : start + step], self.sample_rate, self._pts + start))
            frames += pull_ready(self._graph)
        self._pts += chunk.size
        out = frames_to_array(frames)
        self._out += out.size
        return out

    def flush(self) -> np.ndarray:
        if self._graph is None:
            return np.zeros(0, dtype=np.float32)
        pad = np.zeros(round(_TAIL_PAD_S * self.sample_rate), dtype=np.float32)
        self._graph.push(to_frame(pad, self.sample_rate, self._pts))
        self._graph.push(None)
        out = frames_to_array(pull_ready(self._graph))
        out = out[: max(0, round(self._pts / self.speed) - self._out)]
        self.close()
        return out

    def close(self) -> None:
        self._graph = None
        self._pts = 0
        self._out = 0
