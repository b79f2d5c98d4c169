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


def _converted(client: ElevenLabs, output_format: str) -> tuple[bytes, str]:
    """The body of `convert` in `output_format`, and its X-Cache."""
    convert = client.text_to_speech.with_raw_response.convert
    with convert(VOICE, text=TEXT, output_format=output_format) as raw:
        return b"".join(raw.data), raw.headers["x-cache"]


def test_ulaw_8000_is_mu_law_of_the_speech(serve, tmp_path):
    """μ-law is the G.711 coding of the 8 kHz PCM of the same take. The two are compared sample by sample
    rather than each heard by a recogniser: piper draws every take anew, and tiny.en mishears nearly half
    the words of some takes at 8 kHz (the other tests here hear the speech at 16 kHz and up)."""
    from polyvox.backends.embedded import EmbeddedBackend

    url = serve(EmbeddedBackend(), cache_enabled=True, cache_dir=str(tmp_path))  # both answers one take
    client = ElevenLabs(api_key="not-needed-on-an-open-server", base_url=f"{url}/elevenlabs")
    audio, first = _converted(client, "ulaw_8000")
    pcm, again = _converted(client, "pcm_8000")
    assert (first, again) == ("MISS", "HIT")
    _speech_length(len(audio) / 8000, TEXT)  # one byte a sample
    # G.711 μ-law decoded by hand (the inverse of the encoding), on the 16-bit scale of the PCM
    u = ~np.frombuffer(audio, dtype=np.uint8).astype(np.int32) & 0xFF
    magnitude = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    decoded = np.where(u & 0x80, 0x84 - magnitude, magnitude - 0x84).astype(np.float64)
    linear = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert decoded.size == linear.size
    assert np.sqrt(np.mean(linear**2)) > 300  # speech, not near-silence, which any coding matches
    # μ-law keeps each sample to within a sixteenth of its size, plus 8 (its steps grow with the
    # magnitude): true of every 16-bit value coded right, false of a lost sign or a shifted mantissa
    assert np.all(np.abs(decoded - linear) <= np.abs(linear) / 16 + 8)


def test_voices_lists_the_builtin_voices(client):
    voices = client.voices.get_all().voices
    assert VOICE in {voice.voice_id for voice in voices}
