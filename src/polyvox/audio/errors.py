"""Exceptions of the audio layer; the server maps each to one HTTP error."""

from __future__ import annotations


class AudioError(Exception):
    """Base class for every audio-layer error."""


class UnsupportedFormat(AudioError, ValueError):
    """A response format polyvox cannot produce. `param` names the request field at fault."""

    def __init__(self, message: str, param: str = "response_format"):
        super().__init__(message)
        self.message = message
        self.param = param


class UnsupportedSampleRate(UnsupportedFormat):
    """A sample rate the chosen format (or codec) cannot carry."""

    def __init__(self, message: str, param: str = "sample_rate"):
        super().__init__(message, param)


class AudioDecodeError(AudioError, ValueError):
    """Bytes that are not decodable audio (or audio outside the allowed bounds)."""


class AudioDecodeStopped(AudioDecodeError):
    """Decoding stopped at one of its bounds before the end of the file. `decoded_samples` counts the
    samples (of all channels) decoded by then: 0 when the file was refused before decoding."""

    def __init__(self, message: str, decoded_samples: int):
        super().__init__(message)
        self.decoded_samples = decoded_samples


class AudioTooLong(AudioDecodeStopped):
    """Audio longer than allowed: its container states so, or decoding reached the limit."""
