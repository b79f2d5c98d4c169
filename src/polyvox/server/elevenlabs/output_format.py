"""ElevenLabs' `output_format` query values (`mp3_44100_128`, `pcm_24000`, `ulaw_8000`...) read as a
polyvox response format and sample rate; a value polyvox cannot serve is a 400 naming it. μ-law is
made here from 16-bit PCM (it is a per-sample table: any chunk converts on its own)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyvox.audio.formats import FORMATS
from polyvox.server.errors import APIError

DEFAULT_OUTPUT_FORMAT = "mp3_44100_128"  # ElevenLabs' own default
# ElevenLabs codec name -> polyvox response_format (μ-law is PCM turned to μ-law here)
_CODECS = {"mp3": "mp3", "pcm": "pcm", "opus": "opus", "ulaw": "pcm", "wav": "wav"}


@dataclass(frozen=True)
class OutputFormat:
    """What `output_format` asks: polyvox's `response_format` and `sample_rate`, and whether the PCM
    is turned into μ-law before it leaves."""

    name: str
    response_format: str
    sample_rate: int
    ulaw: bool = False

    @property
    def media_type(self) -> str:
        if self.ulaw:
            return "audio/basic"
        if self.response_format == "pcm":
            return f"audio/pcm;rate={self.sample_rate};channels=1"
        return FORMATS[self.response_format].mime_type


def parse_output_format(value: str | None) -> OutputFormat:
    """`codec_rate[_bitrate]` as ElevenLabs spells it; 400 `unsupported_output_format` otherwise. The
    bitrate is not kept: polyvox encodes MP3 at its own constant bitrate."""
    name = value or DEFAULT_OUTPUT_FORMAT
    codec, _, rest = name.partition("_")
    rate_text = rest.partition("_")[0]
    response_format = _CODECS.get(codec)
    if response_format is None or not rate_text.isdigit() or (codec == "ulaw" and rate_text != "8000"):
        raise _unsupported(name, "")
    rate = int(rate_text)
    fmt = FORMATS[response_format]
    if fmt.sample_rates is not None and rate not in fmt.sample_rates:
        raise _unsupported(name, f"; {codec} rates: {', '.join(str(r) for r in fmt.sample_rates)}")
    if not 8000 <= rate <= 48000:
        raise _unsupported(name, "; rates from 8000 to 48000 Hz")
    return OutputFormat(name, response_format, rate, ulaw=codec == "ulaw")


def _unsupported(name: str, detail: str) -> APIError:
    return APIError(
        400,
        f"output_format {name!r} is not served here{detail}; use mp3_<rate>_<kbps>, pcm_<rate>, "
        "opus_<rate>_<kbps> or ulaw_8000",
        param="output_format",
        code="unsupported_output_format",
    )


class UlawEncoder:
    """16-bit little-endian PCM chunks to G.711 μ-law bytes; an odd byte waits for the next chunk."""

    def __init__(self) -> None:
        self.carry = b""

    def push(self, data: bytes) -> bytes:
        data = self.carry + data
        even = len(data) - len(data) % 2
        self.carry = data[even:]
        return ulaw(np.frombuffer(data[:even], dtype="<i2"))


def ulaw(samples: np.ndarray) -> bytes:
    """G.711 μ-law of 16-bit samples (on 14 bits, biased, segment and mantissa, bits inverted)."""
    x = samples.astype(np.int32) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(x), 8159) + 0x21
    segment = np.maximum(np.floor(np.log2(magnitude)).astype(np.int32) - 5, 0)
    value = np.where(segment > 7, 0x7F, (segment << 4) | ((magnitude >> (segment + 1)) & 0x0F))
    return (value ^ mask).astype(np.uint8).tobytes()
