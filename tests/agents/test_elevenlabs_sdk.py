"""The ElevenLabs Python SDK pointed at polyvox (`base_url=http://host/elevenlabs`), with the embedded
voice: `convert`, `stream` and `convert_with_timestamps` / `stream_with_timestamps` answer audio that
decodes and is as long as speech of the text, whose words a recogniser hears, and the character
alignment covers the text in order, inside the audio."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from elevenlabs.client import ElevenLabs
from elevenlabs.core.api_error import ApiError

from agents.conftest import VOICE
from helpers.asr import HEARD_WER, transcribe, word_error_rate
from helpers.audio import decode, pcm_samples

TEXT = "The garden gate was open. Two cats sat on the warm stone wall."
HEARD = "the garden gate was open two cats sat on the warm stone wall"


@pytest.fixture(scope="module")
def client(embedded_url):
    return ElevenLabs(api_key="not-needed-on-an-open-server", base_url=f"{embedded_url}/elevenlabs")


def _speech_length(seconds: float, text: str) -> None:
    # About 12 to 20 characters a second is speech; a generous band either way.
    assert len(text) / 30 < seconds < len(text) / 5, seconds


def test_convert_answers_an_mp3_of_the_text(client):
    audio = b"".join(client.text_to_speech.convert(VOICE, text=TEXT, output_format="mp3_44100_128"))
    samples, rate = decode(audio)
    assert rate == 44100
    _speech_length(samples.size / rate, TEXT)
    assert word_error_rate(HEARD, transcribe(samples, rate)) <= HEARD_WER


def test_stream_answers_pcm_at_the_rate_asked(client):
    chunks = list(client.text_to_speech.stream(VOICE, text=TEXT, output_format="pcm_16000"))
    audio = b"".join(chunks)
    assert len(audio) % 2 == 0
    samples = pcm_samples(audio)
    _speech_length(samples.size / 16000, TEXT)
    assert word_error_rate(HEARD, transcribe(samples, 16000)) <= HEARD_WER


def _check_alignment(alignment, text: str, audio_s: float) -> None:
    assert "".join(alignment.characters) == text
    starts, ends = alignment.character_start_times_seconds, alignment.character_end_times_seconds
    assert len(starts) == len(ends) == len(text)
    assert all(a <= b for a, b in zip(starts, starts[1:], strict=False)), "starts in order"
    assert all(s <= e for s, e in zip(starts, ends, strict=True))
    assert starts[0] >= 0 and ends[-1] <= audio_s + 0.01
    # Speech runs over the whole answer: the last word starts in its second half.
    assert starts[text.index("wall")] > audio_s / 2


def test_convert_with_timestamps_times_every_character_inside_the_audio(client):
    answer = client.text_to_speech.convert_with_timestamps(VOICE, text=TEXT, output_format="pcm_24000")
    audio = base64.b64decode(answer.audio_base_64)
    audio_s = len(audio) / 2 / 24000
    _speech_length(audio_s, TEXT)
    assert answer.alignment is not None, "no alignment: are word timings wired?"
    _check_alignment(answer.alignment, TEXT, audio_s)
    assert answer.normalized_alignment.characters == answer.alignment.characters


def test_stream_with_timestamps_sends_audio_and_alignment_as_it_goes(client):
    audio = b""
    characters, starts, ends = [], [], []
    for chunk in client.text_to_speech.stream_with_timestamps(VOICE, text=TEXT, output_format="pcm_24000"):
        audio += base64.b64decode(chunk.audio_base_64 or "")
        if chunk.alignment is not None:
            characters += chunk.alignment.characters
            starts += chunk.alignment.character_start_times_seconds
            ends += chunk.alignment.character_end_times_seconds
    audio_s = len(audio) / 2 / 24000
    _speech_length(audio_s, TEXT)

    class Joined:
        pass

    joined = Joined()
    joined.characters, joined.character_start_times_seconds, joined.character_end_times_seconds = (
        characters,
        starts,
        ends,
    )
    _check_alignment(joined, TEXT, audio_s)


def test_an_output_format_polyvox_cannot_serve_is_a_400_naming_it(client):
    with pytest.raises(ApiError) as refused:
        b"".join(client.text_to_speech.convert(VOICE, text="Hello.", output_format="alaw_8000"))
    assert refused.value.status_code == 400
    assert "alaw_8000" in refused.value.body["error"]["message"]
    assert refused.value.body["error"]["param"] == "output_format"


def test_ulaw_8000_is_mu_law_of_the_speech(client):
    audio = b"".join(client.text_to_speech.convert(VOICE, text=TEXT, output_format="ulaw_8000"))
    _speech_length(len(audio) / 8000, TEXT)  # one byte a sample
    # G.711 μ-law decoded by hand (the inverse of the encoding), then heard.
    u = ~np.frombuffer(audio, dtype=np.uint8).astype(np.int32) & 0xFF
    magnitude = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    samples = np.where(u & 0x80, 0x84 - magnitude, magnitude - 0x84).astype(np.float32) / 32768.0
    assert word_error_rate(HEARD, transcribe(samples, 8000)) <= HEARD_WER


def test_voices_lists_the_builtin_voices(client):
    voices = client.voices.get_all().voices
    assert VOICE in {voice.voice_id for voice in voices}
