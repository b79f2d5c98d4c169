"""One response's audio path: time-stretch, resample, encode. The server runs it in a worker thread.

`OutputPipeline` streams; `render` makes a complete file (exact WAV sizes, MP3 Xing/FLAC
STREAMINFO filled in) from a whole utterance.
"""

from __future__ import annotations

import numpy as np

from polyvox.audio.encode import StreamEncoder, encode_audio
from polyvox.audio.formats import AudioFormat, get_format
from polyvox.audio.resample import Resampler
from polyvox.audio.stretch import TimeStretcher


class OutputPipeline:
    """Turns engine chunks (float32 mono at `in_rate`) into encoded bytes of `fmt` at `out_rate`.

    `push` per chunk and `finish` once each return the bytes ready to send; `seconds` counts the
    audio encoded so far, after the speed change. Format and rate are validated on construction.
    """

    def __init__(self, in_rate: int, out_rate: int, fmt: str | AudioFormat, speed: float = 1.0) -> None:
        self.format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
        self.out_rate = self.format.check_rate(out_rate)
        self.in_rate = in_rate
        self._stretcher = TimeStretcher(in_rate, speed)
        self._resampler = Resampler(in_rate, out_rate)
        self._encoder = StreamEncoder(self.format, out_rate)
        self._samples = 0

    @property
    def content_type(self) -> str:
        return self.format.content_type(self.out_rate)

    @property
    def seconds(self) -> float:
        """Seconds of output audio encoded so far."""
        return self._samples / self.out_rate

    def push(self, chunk: np.ndarray) -> bytes:
        return self._encode(self._resampler.process(self._stretcher.process(chunk)))

    def finish(self) -> bytes:
        tail = self._resampler.process(self._stretcher.flush())
        data = self._encode(np.concatenate([tail, self._resampler.flush()]))
        return data + self._encoder.finish()

    def _encode(self, samples: np.ndarray) -> bytes:
        self._samples += samples.size
        return self._encoder.encode(samples)


def render(
    samples: np.ndarray, in_rate: int, out_rate: int, fmt: str | AudioFormat, speed: float = 1.0
) -> bytes:
    """A complete file of `fmt` at `out_rate` from a whole utterance at `in_rate`, played at `speed`."""
    audio_format = fmt if isinstance(fmt, AudioFormat) else get_format(fmt)
    audio_format.check_rate(out_rate)
    stretcher = TimeStretcher(in_rate, speed)
    resampler = Resampler(in_rate, out_rate)
    stretched = np.concatenate([stretcher.process(samples), stretcher.flush()])
    out = np.concatenate([resampler.process(stretched), resampler.flush()])
    return encode_audio(out, out_rate, audio_format)
