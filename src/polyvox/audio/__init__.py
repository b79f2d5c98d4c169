"""Audio out and in: PyAV encode/decode, resampling, time-stretch, and the per-response pipeline."""

from polyvox.audio.decode import audio_duration, decode_audio
from polyvox.audio.encode import StreamEncoder, encode_audio
from polyvox.audio.errors import AudioDecodeError, AudioError, UnsupportedFormat, UnsupportedSampleRate
from polyvox.audio.formats import (
    DEFAULT_FORMAT,
    DEFAULT_SAMPLE_RATE,
    FORMATS,
    AudioFormat,
    get_format,
    resolve,
)
from polyvox.audio.pipeline import OutputPipeline, render
from polyvox.audio.resample import Resampler
from polyvox.audio.stretch import TimeStretcher

__all__ = [
    "DEFAULT_FORMAT",
    "DEFAULT_SAMPLE_RATE",
    "FORMATS",
    "AudioDecodeError",
    "AudioError",
    "AudioFormat",
    "OutputPipeline",
    "Resampler",
    "StreamEncoder",
    "TimeStretcher",
    "UnsupportedFormat",
    "UnsupportedSampleRate",
    "audio_duration",
    "decode_audio",
    "encode_audio",
    "get_format",
    "render",
    "resolve",
]
