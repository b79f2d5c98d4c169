"""The OpenAI speech protocol as pydantic models: the request of `POST /v1/audio/speech` (with
polyvox's extension fields), the SSE events, the answer with word timestamps, and the list shapes of
/v1/models and the voice routes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from polyvox.settings.guidance import (
    CFG_VALUE_MAX,
    CFG_VALUE_MIN,
    INFERENCE_TIMESTEPS_MAX,
    INFERENCE_TIMESTEPS_MIN,
)
from polyvox.text.emotion import Emotion

# The audio formats, and the subtitle formats (the answer's words as SubRip or WebVTT cues, no audio)
ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "srt", "vtt"]
SUBTITLE_FORMATS = ("srt", "vtt")
StreamFormat = Literal["audio", "sse"]
# What `timestamp_granularities` asks for, as OpenAI's transcriptions name it: words, and segments (pieces)
TimestampGranularity = Literal["word", "segment"]
PITCH_LIMIT = 12.0  # semitones either way: an octave
# The names a reference clip's transcript goes by (uttera-tts-vllm's and the official code's); voice
# creation accepts these and its own ("transcript", "text").
REF_TEXT_FIELDS = ("ref_text", "reference_text", "prompt_text")


def first_lone_surrogate(text: str) -> int | None:
    """Where `text` holds a lone UTF-16 surrogate (`"\\udc80"` is valid JSON, but not text anything
    downstream can encode), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def reject_lone_surrogates(value: Any) -> Any:
    """A string field with a lone surrogate is refused here, naming the field, instead of failing later."""
    if isinstance(value, str) and (at := first_lone_surrogate(value)) is not None:
        raise PydanticCustomError(
            "lone_surrogate",
            "contains a lone UTF-16 surrogate (U+{code} at character {at}), which is not text",
            {"code": f"{ord(value[at]):04X}", "at": at},
        )
    return value


# A string field of a request: any valid JSON string is taken, and one that is not text gets a 400.
Text = Annotated[str, BeforeValidator(reject_lone_surrogates)]


def numbers_only(value: Any, info: ValidationInfo) -> Any:
    """A number field takes a number: never a boolean (JSON's `true` is no 1.0), nor a string unless the
    fields are a form's (validated with `FORM`), which are all text and are parsed as numbers."""
    if isinstance(value, bool) or (isinstance(value, str) and not (info.context or {}).get("form")):
        raise PydanticCustomError(
            "number_type", "Input should be a number, not {kind}", {"kind": _kind(value)}
        )
    return value


def _kind(value: Any) -> str:
    return "a boolean" if isinstance(value, bool) else "a string"


FORM = {"form": True}  # the validation context of a form's fields
Number = BeforeValidator(numbers_only)


class SpeechRequest(BaseModel):
    """`POST /v1/audio/speech`, as JSON or multipart/form-data. Unknown fields are ignored.

    As OpenAI does, the answer streams by default: the encoded file as it is produced (`stream_format`
    absent or `audio`), or `speech.audio.delta` events carrying it in base64 (`sse`). `stream: false`
    (a polyvox extension) asks for one complete file with its `Content-Length` instead.
    `timestamp_granularities` (a polyvox extension, named as in OpenAI's transcriptions) adds word
    timestamps: `speech.audio.timestamps` events in SSE, otherwise one JSON answer
    (`SpeechWithTimestamps`); `response_format` `srt` or `vtt` answers them as subtitles.

    Numbers are numbers: a JSON body gives them as JSON numbers (an integer where a float is asked is
    fine), never `true` or `"1.5"`; a form's fields are all text, parsed as numbers when the form is
    validated with the `FORM` context.
    """

    model_config = ConfigDict(extra="ignore")

    model: Text = "tts-1"
    input: Text  # text with nothing to say, "" too, is refused once: `EmptyInput` (400 empty_input)
    voice: Text = "alloy"
    instructions: Text | None = None
    response_format: ResponseFormat = "mp3"
    speed: Annotated[float, Number] = Field(1.0, ge=0.25, le=4.0)
    stream_format: StreamFormat | None = None
    # polyvox / uttera-tts-vllm extensions
    emotion: Emotion | None = Field(
        None, description="How the voice feels (VoxCPM2: a style in its voice design); default: the voice's."
    )
    pitch: Annotated[float, Number] = Field(
        0.0,
        ge=-PITCH_LIMIT,
        le=PITCH_LIMIT,
        description="Semitones up (or down, negative) at the same tempo, on every engine.",
    )
    stream: bool = Field(
        True,
        description="False answers one complete file with Content-Length (when `stream_format` is absent).",
    )
    sample_rate: Annotated[int | None, Number] = Field(
        None, ge=8000, le=48000, description="Output sample rate; default 24000."
    )
    seed: Annotated[int | None, Number] = Field(None, ge=0, le=2**63 - 1)
    cfg_value: Annotated[float | None, Number] = Field(None, ge=CFG_VALUE_MIN, le=CFG_VALUE_MAX)
    inference_timesteps: Annotated[int | None, Number] = Field(
        None, ge=INFERENCE_TIMESTEPS_MIN, le=INFERENCE_TIMESTEPS_MAX
    )
    cache: bool = True
    ref_audio: Text | None = Field(
        None, description="One-off voice clone: a reference clip as base64 or a data URL (JSON bodies)."
    )
    ref_text: Text | None = Field(
        None,
        validation_alias=AliasChoices(*REF_TEXT_FIELDS),
        description="The transcript of the one-off reference clip (optional; aliases reference_text, "
        "prompt_text).",
    )
    normalize: bool | None = Field(
        None, description="Spell out numbers, dates and symbols before synthesis; default: the server's."
    )
    lora: Text | None = Field(
        None,
        description="A loaded LoRA adapter to speak with, combined with `voice` or the one-off clone "
        "(`voice` naming an adapter alone speaks with it).",
    )
    timestamp_granularities: list[TimestampGranularity] | None = Field(
        None,
        description="Word timestamps: `word` and/or `segment` (each piece). With `stream_format: sse` as "
        "`speech.audio.timestamps` events; otherwise the answer is one JSON object with the audio in base64.",
    )

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_id(cls, value: Any) -> Any:
        """OpenAI also accepts a custom voice as `{"id": "..."}`."""
        if isinstance(value, dict) and "id" in value:
            return value["id"]
        return value

    @field_validator(
        "instructions",
        "stream_format",
        "sample_rate",
        "seed",
        "ref_audio",
        "ref_text",
        "normalize",
        "lora",
        "emotion",
        mode="before",
    )
    @classmethod
    def _blank_is_absent(cls, value: Any) -> Any:
        """Empty form fields mean "not given"."""
        return None if value == "" else value

    @field_validator("timestamp_granularities", mode="before")
    @classmethod
    def _granularities(cls, value: Any) -> Any:
        """A form gives them as text: one value, or several separated by commas; none given: absent."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        return value or None

    @field_validator("timestamp_granularities")
    @classmethod
    def _each_once(cls, value: list[TimestampGranularity] | None) -> list[TimestampGranularity] | None:
        return list(dict.fromkeys(value)) if value else None

    @property
    def subtitles(self) -> bool:
        """The answer is the words as subtitles (`srt`, `vtt`), not audio."""
        return self.response_format in SUBTITLE_FORMATS

    @field_validator("emotion", mode="before")
    @classmethod
    def _emotion_word(cls, value: Any) -> Any:
        """`Happy` or ` sad ` name the emotion as `happy` and `sad` do."""
        return value.strip().lower() if isinstance(value, str) else value


class SpeechUsage(BaseModel):
    input_tokens: int
    output_tokens: int
    total_tokens: int


class SpeechAudioDelta(BaseModel):
    type: Literal["speech.audio.delta"] = "speech.audio.delta"
    audio: str


class WordTimestamp(BaseModel):
    """A word the client sent and when it is heard, in seconds from the answer's first sample (OpenAI's
    transcription `words`); `approximate` (only when true): shared out by length, not found in the audio."""

    word: str
    start: float
    end: float
    approximate: bool | None = None


class SegmentTimestamp(BaseModel):
    """One piece (a sentence) of the answer: the client's text of it and its bounds (OpenAI's
    transcription `segments`)."""

    id: int
    start: float
    end: float
    text: str


class SpeechAudioTimestamps(BaseModel):
    """SSE: one piece's timestamps, sent as soon as they are known (`words`, `segment`: as asked)."""

    type: Literal["speech.audio.timestamps"] = "speech.audio.timestamps"
    segment: SegmentTimestamp | None = None
    words: list[WordTimestamp] | None = None


class SpeechAudioDone(BaseModel):
    type: Literal["speech.audio.done"] = "speech.audio.done"
    usage: SpeechUsage
    words: list[WordTimestamp] | None = None  # with `timestamp_granularities`: all of them, as asked
    segments: list[SegmentTimestamp] | None = None


class SpeechWithTimestamps(BaseModel):
    """The whole answer of a request with `timestamp_granularities` (not SSE): the file in
    `response_format`, base64, and its timestamps."""

    object: Literal["audio.speech"] = "audio.speech"
    audio: str
    response_format: str
    content_type: str
    duration: float
    words: list[WordTimestamp] | None = None
    segments: list[SegmentTimestamp] | None = None
    usage: SpeechUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "polyvox"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class WebUIModel(BaseModel):
    id: str
    name: str
    emotions: list[str] = Field(default_factory=list, description="The `emotion`s this model speaks.")


class WebUIModelList(BaseModel):
    """Open WebUI's shape for `GET /v1/audio/models`."""

    models: list[WebUIModel]


class WebUIVoice(BaseModel):
    id: str
    name: str


class WebUIVoiceList(BaseModel):
    """Open WebUI's shape for `GET /v1/audio/voices`."""

    voices: list[WebUIVoice]


class VoiceCard(BaseModel):
    id: str
    object: Literal["voice"] = "voice"
    name: str
    source: str = "builtin"


class VoiceList(BaseModel):
    """uttera-tts-vllm's shape for `GET /v1/voices`."""

    object: Literal["list"] = "list"
    data: list[VoiceCard]
    default: str = "alloy"


class VoiceDeleted(BaseModel):
    id: str
    object: Literal["audio.voice.deleted"] = "audio.voice.deleted"
    deleted: bool = True


class VoicesReloaded(BaseModel):
    """`POST /admin/reload-voices`: the registered voices now served and what was skipped, and why."""

    object: Literal["voices.reload"] = "voices.reload"
    voices: list[str]
    problems: list[str]


class VoiceConsent(BaseModel):
    """A consent recording, as OpenAI's `audio.voice_consent` object."""

    id: str
    object: Literal["audio.voice_consent"] = "audio.voice_consent"
    name: str
    language: str
    created_at: int


class VoiceConsentList(BaseModel):
    """A page of consent recordings (cursor pagination: pass `last_id` as `after` for the next)."""

    object: Literal["list"] = "list"
    data: list[VoiceConsent]
    first_id: str | None
    last_id: str | None
    has_more: bool


class VoiceConsentDeleted(BaseModel):
    id: str
    object: Literal["audio.voice_consent"] = "audio.voice_consent"
    deleted: bool = True
