"""The length a WAV header declares, as written: a file's claim, not what ffmpeg clips it to; chunks
before `data` are stepped over, RF64 keeps its size in `ds64`, and a streamed WAV's unknown size (or
a file that is not a WAV) declares nothing. Files are written with `struct` and the `wave` module."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from audio.hostile_clips import wav_claiming
from polyvox.audio.wav_header import declared_seconds


def riff(*chunks: tuple[bytes, bytes], form: bytes = b"RIFF", data_size: int | None = None) -> bytes:
    body = b"WAVE"
    for name, content in chunks:
        size = data_size if name == b"data" and data_size is not None else len(content)
        body += name + struct.pack("<I", size) + content + (b"\0" if len(content) % 2 else b"")
    return form + struct.pack("<I", len(body)) + body


FMT = (b"fmt ", struct.pack("<HHIIHH", 1, 2, 16000, 64000, 4, 16))  # stereo 16-bit, 4 bytes a frame


def test_a_claim_past_the_file_is_read_as_written() -> None:
    assert declared_seconds(wav_claiming(10**9, 2.0)) == pytest.approx(10**9 / 24000)


def test_a_wave_module_file_declares_what_it_holds() -> None:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 12000)
    assert declared_seconds(buffer.getvalue()) == pytest.approx(1.5)


def test_chunks_before_data_are_stepped_over_odd_sizes_padded() -> None:
    data = riff(FMT, (b"LIST", b"INFOabc"), (b"data", b"\0" * 64000))
    assert declared_seconds(data) == pytest.approx(1.0)


def test_rf64_keeps_its_size_in_ds64() -> None:
    ds64 = (b"ds64", struct.pack("<QQQI", 0, 4 * 16000 * 3600, 0, 0))  # an hour of stereo frames
    data = riff(ds64, FMT, (b"data", b"\0" * 400), form=b"RF64", data_size=0xFFFFFFFF)
    assert declared_seconds(data) == pytest.approx(3600.0)


@pytest.mark.parametrize("size", [0xFFFFFFFF, 0])
def test_a_streamed_wav_declares_no_length(size: int) -> None:
    assert declared_seconds(riff(FMT, (b"data", b"\0" * 400), data_size=size)) is None


@pytest.mark.parametrize(
    "data", [b"", b"fLaC" + b"\0" * 40, riff((b"data", b"\0" * 8)), b"RIFF\0\0\0\0WAVEfmt "]
)
def test_what_is_no_readable_wav_header_declares_nothing(data: bytes) -> None:
    assert declared_seconds(data) is None
