"""Decoding uploaded audio (any container and codec ffmpeg reads) into mono float32 at a chosen rate.

Channels are averaged and the rate changed with soxr at high quality (`audio.resample.resample_clip`)
— what the official VoxCPM2 code gets from `librosa.load`, so a clone reference at any rate gives it
the same samples.

Decoding is bounded, because an upload is untrusted and a few compressed bytes can hold hours of audio
(FLAC stores a block of digital silence in about ten bytes). A file whose header states a length over
`max_seconds` is refused before anything is decoded, whatever the file goes on to hold (a WAV's
length as its header declares it, `wav_header`, which ffmpeg would clip to the file's size; only
containers that record their length: ffmpeg guesses an MP3's or a raw AAC stream's from its bit
rate, so those are left to the next bounds). Decoding then goes packet by packet and stops as soon
as the file passes any of:

- `max_seconds` of audio, counted at the file's own rate;
- `MAX_SAMPLES_PER_BYTE` decoded samples (all channels together) per byte of the file: no speech codec
  comes near it (Opus at its lowest 6 kbit/s gives 48 kHz stereo 128 samples per byte), so the work
  grows with the size of the upload whatever the file says about itself;
- `max_seconds` at `MAX_SAMPLES_PER_SECOND` (192 kHz stereo): the most work and memory one clip may
  take, whatever its rate or channel count;
- one packet per byte of the file (every packet takes at least one).

Samples that are not finite numbers (NaN or infinity, which float formats can carry) are refused."""

from __future__ import annotations

import io
import math

import av
import numpy as np

from polyvox.audio.errors import AudioDecodeError, AudioDecodeStopped, AudioTooLong
from polyvox.audio.resample import resample_clip
from polyvox.audio.wav_header import declared_seconds

MAX_SAMPLES_PER_BYTE = 256
MAX_SAMPLES_PER_SECOND = 2 * 192_000
# ffmpeg's names of containers whose header records the length of their audio
STATED_LENGTH_FORMATS = frozenset(
    {"wav", "w64", "aiff", "caf", "flac", "ogg", "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm"}
)


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


def stated_seconds(
    container: av.container.InputContainer, stream: av.AudioStream, data: bytes
) -> float | None:
    """The audio's length as the file's header records it (a WAV's as written, even past what the file
    holds); None where it records none (or where ffmpeg would only estimate it from the bit rate)."""
    if container.format.name not in STATED_LENGTH_FORMATS:
        return None
    if container.format.name == "wav" and (declared := declared_seconds(data)) is not None:
        return declared
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and len(container.streams) == len(container.streams.audio):
        return container.duration / av.time_base
    return None


def decode_audio(data: bytes, target_rate: int, max_seconds: float | None = None) -> np.ndarray:
    """Decode `data` to mono float32 samples at `target_rate`, downmixing and resampling as needed.

    Raises AudioDecodeError for bytes that are not audio, audio with no samples or with samples that
    are not finite; AudioTooLong for audio longer than `max_seconds`, and AudioDecodeStopped where the
    file passes another bound of decoding (see the module docstring): both say how much was decoded.
    """
    container = _open(data)
    try:
        stream = container.streams.audio[0]
        stated = stated_seconds(container, stream, data)
        if max_seconds is not None and stated is not None and stated > max_seconds:
            raise AudioTooLong(
                f"The audio is longer than the allowed {max_seconds:g} s: its header states {stated:.1f} s.",
                0,
            )
        mono, rate = _decode_mono(container, stream, len(data), max_seconds)
    finally:
        container.close()
    if mono.size == 0:
        raise AudioDecodeError("The file contains no audio samples.")
    samples = resample_clip(mono, rate, target_rate)
    if not np.isfinite(samples).all():  # finite samples so large that mixing or resampling overflowed
        raise AudioDecodeError("The audio's samples are too large to be mixed and resampled.")
    return samples


def _decode_mono(
    container: av.container.InputContainer, stream: av.AudioStream, size: int, max_seconds: float | None
) -> tuple[np.ndarray, int]:
    """Decode packet by packet, averaging channels frame by frame, within the module's bounds."""
    max_values = MAX_SAMPLES_PER_BYTE * size
    if max_seconds is not None:
        max_values = min(max_values, math.ceil(max_seconds * MAX_SAMPLES_PER_SECOND))
    chunks: list[np.ndarray] = []
    converter = None
    rate = channels = packets = values = samples = 0
    limit = None
    try:
        for packet in container.demux(stream):
            packets += 1
            if packets > size:
                raise AudioDecodeStopped("The file holds more packets than bytes; decoding stopped.", values)
            for frame in packet.decode():
                if converter is None:  # every frame in the first frame's layout and rate, as float
                    rate = frame.sample_rate
                    channels = len(frame.layout.channels)
                    converter = av.AudioResampler(format="flt", layout=frame.layout.name, rate=rate)
                    limit = None if max_seconds is None else int(max_seconds * rate) + 1
                values += frame.samples * len(frame.layout.channels)
                chunks.extend(_mono(out, channels) for out in converter.resample(frame))
                samples += frame.samples
                if limit is not None and samples > limit:
                    raise AudioTooLong(
                        f"The audio is longer than the allowed {max_seconds:g} s (decoding stopped there).",
                        values,
                    )
                if values > max_values:
                    raise AudioDecodeStopped(_too_many_samples(values, size, max_seconds), values)
        if converter is not None:
            chunks.extend(_mono(out, channels) for out in converter.resample(None))
    except AudioDecodeError:
        raise
    except (av.FFmpegError, ValueError) as exc:  # ValueError: a stream PyAV cannot convert
        raise AudioDecodeError(f"The audio could not be decoded: {_reason(exc)}.") from exc
    mono = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32), rate


def _mono(frame: av.AudioFrame, channels: int) -> np.ndarray:
    """One converted frame's samples, channels averaged; refuses NaN and infinity."""
    interleaved = frame.to_ndarray().reshape(-1, channels)
    if not np.isfinite(interleaved).all():
        raise AudioDecodeError("The audio contains samples that are not finite numbers (NaN or infinity).")
    return interleaved.mean(axis=1, dtype=np.float32) if channels > 1 else interleaved[:, 0]


def _too_many_samples(values: int, size: int, max_seconds: float | None) -> str:
    if values > MAX_SAMPLES_PER_BYTE * size:
        return (
            f"The file decodes to more than {MAX_SAMPLES_PER_BYTE} samples per byte of its size, which no "
            f"speech recording does; decoding stopped after {values} samples."
        )
    return (
        f"The audio holds more samples than {max_seconds:g} s of 192 kHz stereo; "
        f"decoding stopped after {values} samples."
    )


def audio_duration(data: bytes) -> float:
    """Duration in seconds of the first audio stream, counted from its decoded samples. Decodes the
    whole file, unbounded: for trusted files only (clips go through `decode_audio`)."""
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
