"""Hostile reference clips, written with plain PyAV and the standard library (never polyvox's own audio
code): FLAC files that hold hours of digital silence in two megabytes, and float WAVs carrying NaN or
infinity."""

from __future__ import annotations

import io
import struct

import av
import numpy as np

FLAC_BLOCK = 65535  # the largest FLAC block: a block of digital silence is a 13-byte frame


def _flac_silence(seconds: float, rate: int, layout: str) -> bytes:
    channels = len(av.AudioLayout(layout).channels)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="flac") as output:
        stream = output.add_stream("flac", rate=rate, layout=layout)
        stream.codec_context.options = {"frame_size": str(FLAC_BLOCK)}
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, channels * int(seconds * rate)), np.int16), format="s16", layout=layout
        )
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return buffer.getvalue()


def _metadata_end(flac: bytes) -> int:
    """Offset of the first audio frame: after `fLaC` and the metadata blocks (the last one is flagged)."""
    offset = 4
    while True:
        last, length = flac[offset] & 0x80, int.from_bytes(flac[offset + 1 : offset + 4], "big")
        offset += 4 + length
        if last:
            return offset


def _with_total_samples(flac: bytes, total: int) -> bytes:
    """STREAMINFO's 36-bit count of samples per channel set to `total` (0: the length is not stated)."""
    at = 18  # `fLaC`, the block header, then 10 bytes before rate, channels, depth and the count
    fields = int.from_bytes(flac[at : at + 8], "big")
    fields = (fields & ~((1 << 36) - 1)) | total
    return flac[:at] + fields.to_bytes(8, "big") + flac[at + 8 :]


def long_silent_flac(hours: float, rate: int = 48000, state_length: bool = True) -> tuple[bytes, int]:
    """A FLAC holding `hours` of digital silence (1.8 MB for 53 hours at 48 kHz), made by repeating the
    frames of one encoded minute; its header states the length, or (`state_length=False`) states none.
    Returns the file and the samples it holds per channel."""
    minute = _flac_silence(FLAC_BLOCK * 44 / rate, rate, "mono")  # 44 whole blocks
    start = _metadata_end(minute)
    blocks = int(hours * 3600 * rate) // FLAC_BLOCK
    data = minute[:start] + minute[start:] * (blocks // 44)
    total = blocks // 44 * 44 * FLAC_BLOCK
    return _with_total_samples(data, total if state_length else 0), total


def dense_silent_flac(seconds: float, rate: int = 192000, layout: str = "7.1") -> bytes:
    """A few kilobytes of FLAC that decode to `seconds` of eight-channel high-rate silence."""
    return _flac_silence(seconds, rate, layout)


def float_wav(samples: np.ndarray, rate: int = 24000, dtype: str = "<f4") -> bytes:
    """A mono IEEE-float WAV (format tag 3) of `samples` as they are: NaN and infinity included."""
    data = np.asarray(samples).astype(dtype).tobytes()
    width = np.dtype(dtype).itemsize
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * width, width, 8 * width)
    chunks = (
        b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    )
    return b"RIFF" + struct.pack("<I", len(chunks)) + chunks


def multichannel_wav(seconds: float, rate: int, channels: int) -> bytes:
    """An uncompressed 16-bit WAV of a quiet tone on every channel (two bytes per sample: no codec
    gain)."""
    t = np.arange(int(seconds * rate)) / rate
    tone = (3000 * np.sin(2 * np.pi * 220 * t)).astype("<i2")
    data = np.repeat(tone[:, None], channels, axis=1).tobytes()
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
    chunks = (
        b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    )
    return b"RIFF" + struct.pack("<I", len(chunks)) + chunks


def wav_claiming(samples: int, seconds: float, rate: int = 24000) -> bytes:
    """A 16-bit mono WAV holding `seconds` of a tone whose header claims `samples` samples (its `data`
    and RIFF sizes say so, capped at 2**32 - 2 bytes: 0xFFFFFFFF is the streaming convention)."""
    t = np.arange(int(seconds * rate)) / rate
    data = (3000 * np.sin(2 * np.pi * 220 * t)).astype("<i2").tobytes()
    claimed = min(2 * samples, 2**32 - 2)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    header = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", claimed)
    return b"RIFF" + struct.pack("<I", min(len(header) + claimed, 2**32 - 2)) + header + data
