"""One response's audio path: time-stretch and pitch shift, resample, encode. The server runs it in a
worker thread.

`OutputPipeline` streams, or with `whole` makes one complete file (exact WAV sizes, MP3 Xing and FLAC
STREAMINFO filled in); `render` is that file from a whole utterance at once.
"""

from __future__ import annotations

import threading

import numpy as np

from polyvox.audio.encode import StreamEncoder
from polyvox.audio.formats import AudioFormat, get_format
from polyvox.audio.resample import Resampler
from polyvox.audio.stretch import TimeStretcher


class OutputPipeline:
    """Turns engine chunks (float32 mono at `in_rate`) into encoded bytes of `fmt` at `out_rate`,
    played at `speed` and shifted by `pitch` semitones.

    `push` per chunk and `finish` once each return the bytes ready to send (with `whole`, all of them
    come from `finish`, as one complete file); `seconds` counts the audio encoded so far, after the
    speed change. Format and rate are validated on construction.

    `close` releases the encoder and the filters at once, without flushing (a response cut short;
    `finish` closes too). It may come from another thread than a `push` still running, and waits for
    it: the server closes a cut stream's pipeline while its last chunk may still be encoding.
    """

    def __init__(
        self,
        in_rate: int,
        out_rate: int,
        fmt: str | AudioFormat,
        speed: float = 1.0,
        *,
        whole: bool = False,
        pitch: float = 0.0,
    ) -> None:
        self.format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
        self.out_rate = self.format.check_rate(out_rate)
        self.in_rate = in_rate
        self._stretcher = TimeStretcher(in_rate, speed, pitch)
        self._resampler = Resampler(in_rate, out_rate)
        self._encoder = StreamEncoder(self.format, out_rate, whole=whole)
        self._samples = 0
        self._lock = threading.Lock()

    @property
    def content_type(self) -> str:
        return self.format.content_type(self.out_rate)

    @property
    def seconds(self) -> float:
        """Seconds of output audio encoded so far."""
        return self._samples / self.out_rate

    def push(self, chunk: np.ndarray) -> bytes:
        with self._lock:
            return self._encode(self._resampler.process(self._stretcher.process(chunk)))

    def finish(self) -> bytes:
        with self._lock:
            tail = self._resampler.process(self._stretcher.flush())
            data = self._encode(np.concatenate([tail, self._resampler.flush()]))
            return data + self._encoder.finish()

    def close(self) -> None:
        """Release the encoder and the filters without flushing (idempotent; pushes after it fail)."""
        with self._lock:
            self._encoder.close()
            self._stretcher.close()
            self._resampler.close()

    def _encode(self, samples: np.ndarray) -> bytes:
        self._samples += samples.size
        return self._encoder.encode(samples)


def render(
    samples: np.ndarray,
    in_rate: int,
    out_rate: int,
    fmt: str | AudioFormat,
    speed: float = 1.0,
    pitch: float = 0.0,
) -> bytes:
    """A complete file of `fmt` at `out_rate` from a whole utterance at `in_rate`, played at `speed` and
    shifted by `pitch` semitones."""
    pipeline = OutputPipeline(in_rate, out_rate, fmt, speed, whole=True, pitch=pitch)
    pipeline.push(samples)
    return pipeline.finish()
