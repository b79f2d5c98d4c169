"""The response formats of OpenAI's /v1/audio/speech: codec, container, MIME type and sample rates.

Every format is mono and defaults to 24 kHz, as OpenAI's are; the self-describing ones (all but
`pcm`) may default to another rate (`resolve`'s `default_rate`, the `default_sample_rate` setting),
fitted to what the codec can carry. `pcm` keeps 24 kHz unless a request names a rate: it carries no
header, and its clients assume OpenAI's rate. `pcm` is headerless signed 16-bit little-endian; it is
served as ``audio/pcm;rate=N;channels=1`` because the registered raw type, ``audio/L16``, is
big-endian by definition and would mislead a client that honours it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from polyvox.audio.errors import UnsupportedFormat, UnsupportedSampleRate

DEFAULT_FORMAT = "mp3"
DEFAULT_SAMPLE_RATE = 24_000
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 192_000

_MP3_RATES = (8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000)
_OPUS_RATES = (8_000, 12_000, 16_000, 24_000, 48_000)
_AAC_RATES = (8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 64_000, 88_200, 96_000)


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """How one response format is produced and labelled.

    `container`/`codec` name PyAV's muxer and encoder; both are None for the PCM formats, which
    polyvox writes itself. `sample_rates` None means any rate in [MIN_SAMPLE_RATE, MAX_SAMPLE_RATE].
    """

    name: str
    mime_type: str
    extension: str
    container: str | None = None
    codec: str | None = None
    bit_rate: int | None = None
    sample_rates: tuple[int, ...] | None = None
    container_options: dict[str, str] = field(default_factory=dict)
    # Answered as one complete file unless the client asks to stream: a streamed header that cannot
    # hold the length makes the file unreadable to libsndfile (FLAC's STREAMINFO sample count).
    whole_by_default: bool = False

    def check_rate(self, sample_rate: int) -> int:
        """Return `sample_rate` if this format can carry it, else raise UnsupportedSampleRate."""
        if self.sample_rates is not None:
            if sample_rate not in self.sample_rates:
                allowed = ", ".join(str(r) for r in self.sample_rates)
                raise UnsupportedSampleRate(
                    f"{self.name} cannot be encoded at {sample_rate} Hz; supported rates: {allowed}."
                )
        elif not MIN_SAMPLE_RATE <= sample_rate <= MAX_SAMPLE_RATE:
            raise UnsupportedSampleRate(
                f"{self.name} sample rate must be between {MIN_SAMPLE_RATE} and {MAX_SAMPLE_RATE} Hz, "
                f"got {sample_rate}."
            )
        return sample_rate

    def fit_rate(self, sample_rate: int) -> int:
        """The rate nearest `sample_rate` that this format can carry, never below it where the codec
        allows (22.05 kHz becomes 24 kHz in Opus; 96 kHz becomes 48 kHz in MP3)."""
        if self.sample_rates is None:
            return min(max(sample_rate, MIN_SAMPLE_RATE), MAX_SAMPLE_RATE)
        return next((rate for rate in self.sample_rates if rate >= sample_rate), self.sample_rates[-1])

    def content_type(self, sample_rate: int = DEFAULT_SAMPLE_RATE) -> str:
        """The Content-Type header for a response in this format at `sample_rate`."""
        if self.name == "pcm":
            return f"{self.mime_type};rate={sample_rate};channels=1"
        return self.mime_type


FORMATS: dict[str, AudioFormat] = {
    f.name: f
    for f in (
        AudioFormat(
            name="mp3",
            mime_type="audio/mpeg",
            extension="mp3",
            container="mp3",
            codec="libmp3lame",
            bit_rate=64_000,
            sample_rates=_MP3_RATES,
            container_options={"id3v2_version": "0"},  # bare MPEG frames, no ID3 tag in front
        ),
        AudioFormat(
            name="opus",
            mime_type="audio/ogg",
            extension="opus",
            container="ogg",
            codec="libopus",
            bit_rate=32_000,
            sample_rates=_OPUS_RATES,
            container_options={"page_duration": "100000"},  # a page per 100 ms (default 1 s): streams flow
        ),
        AudioFormat(
            name="aac",
            mime_type="audio/aac",
            extension="aac",
            container="adts",
            codec="aac",
            bit_rate=64_000,
            sample_rates=_AAC_RATES,
        ),
        AudioFormat(
            name="flac",
            mime_type="audio/flac",
            extension="flac",
            container="flac",
            codec="flac",
            container_options={"metadata_header_padding": "0"},  # no 8 KiB padding block up front
            whole_by_default=True,
        ),
        AudioFormat(name="wav", mime_type="audio/wav", extension="wav"),
        AudioFormat(name="pcm", mime_type="audio/pcm", extension="pcm"),
    )
}


def get_format(name: str) -> AudioFormat:
    """The AudioFormat called `name` (case-insensitive), or UnsupportedFormat."""
    fmt = FORMATS.get(name.lower()) if isinstance(name, str) else None
    if fmt is None:
        raise UnsupportedFormat(f"Unsupported response_format {name!r}; choose one of: {', '.join(FORMATS)}.")
    return fmt


def resolve(
    name: str, sample_rate: int | None = None, default_rate: int = DEFAULT_SAMPLE_RATE
) -> tuple[AudioFormat, int]:
    """Validate a format name and an optional rate together. A rate asked for must be one the format
    carries exactly; without one, a self-describing format gets `default_rate` fitted to its codec and
    `pcm` gets 24 kHz."""
    fmt = get_format(name)
    if sample_rate is not None:
        return fmt, fmt.check_rate(sample_rate)
    if fmt.name == "pcm":
        return fmt, DEFAULT_SAMPLE_RATE
    return fmt, fmt.fit_rate(default_rate)


def default_output_rate(setting: int | str, native_rate: int) -> int:
    """The `default_sample_rate` setting as a rate: a number as it is, "native" the engine's own rate."""
    return native_rate if setting == "native" else int(setting)
