"""Word timestamps from the real embedded voice over HTTP (a real server on loopback, the official
`openai` client and httpx): piper's word times against an independent forced alignment of the decoded
answer (pocketsphinx, called directly here), at speed 1 and 2 and across the seams of a three-piece
input; the client's words, not the spoken ones; SSE, the JSON answer, subtitles and the cache.

The bound: piper's times are its duration predictor's, in whole frames of its 256-sample hop (11.6 ms
at 22,050 Hz), and pocketsphinx places a word's start on its own 10 ms frames (25 ms windows) after
at least three HMM states per phone, where a word runs on from the one before it without a pause the
two put the boundary a frame or two apart, and pocketsphinx lets the first word begin at the first
frame, leading silence and all (~80 ms here). Measured over these sentences: median |piper -
pocketsphinx| 1-20 ms, worst 80 ms. So the median stays within 40 ms (three or four frames of either)
and no word is more than 150 ms off: half the shortest word here, so a word timed in the place of
its neighbour fails, as did piper's starts before the word gap was given to the word after it (a
median of 65 ms)."""

from __future__ import annotations

import base64
import io
import json
import re
import statistics
from collections.abc import Iterator

import httpx
import numpy as np
import openai
import pocketsphinx
import pytest
import soundfile
import soxr

from helpers.audio import decode
from helpers.server import running_server
from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.factory import build_text_pipeline
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"
MEDIAN_BOUND_S = 0.040
WORST_BOUND_S = 0.150
ONE = "The quick brown fox jumps over the lazy dog."
THREE = "The quick brown fox jumps over the lazy dog. We bought five apples today. Then we went home."


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    cache, voices = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("voices")
    settings = Settings(cache_enabled=True, cache_dir=cache, voices_dir=voices)
    backend = EmbeddedBackend()
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as base:
        yield base


def timed(url: str, text: str, **fields) -> dict:
    body = {"input": text, "response_format": "wav", "timestamp_granularities": ["word", "segment"], **fields}
    answer = httpx.post(f"{url}{SPEECH}", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    return answer.json()


def audio_of(answer: dict) -> tuple[np.ndarray, int]:
    samples, rate = soundfile.read(io.BytesIO(base64.b64decode(answer["audio"])), dtype="float32")
    return samples, rate


def sphinx_starts(samples: np.ndarray, rate: int, words: list[str]) -> list[float]:
    """Each word's start as pocketsphinx's forced alignment finds it in the audio (its own English model)."""
    decoder = pocketsphinx.Decoder()
    decoder.set_align_text(" ".join(words))
    pcm = (np.clip(soxr.resample(samples, rate, 16000), -1, 1) * 32767).astype("<i2").tobytes()
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    # a word's alternative pronunciation is named "a(2)"; silences and noises "<sil>", "[NOISE]"
    segments = [seg for seg in decoder.seg() if seg.word[0] not in "<["]
    found = [(seg.word.split("(")[0], seg.start_frame / 100) for seg in segments]
    assert [word for word, _ in found] == words
    return [start for _, start in found]


def plain(word: str) -> str:
    return re.sub(r"[^a-z']", "", word.lower())


def check_against_sphinx(answer: dict) -> list[float]:
    """The differences of the answer's word starts from pocketsphinx's, within the module's bounds."""
    samples, rate = audio_of(answer)
    words = [plain(w["word"]) for w in answer["words"]]
    found = sphinx_starts(samples, rate, words)
    differences = [abs(w["start"] - start) for w, start in zip(answer["words"], found, strict=True)]
    assert statistics.median(differences) <= MEDIAN_BOUND_S, differences
    assert max(differences) <= WORST_BOUND_S, differences
    return differences


def in_order_within(words: list[dict], seconds: float) -> None:
    assert all(0 <= w["start"] <= w["end"] <= seconds + 1e-3 for w in words)
    assert all(a["end"] <= b["start"] + 1e-3 for a, b in zip(words, words[1:], strict=False))


def test_word_starts_agree_with_an_independent_alignment_of_the_audio(url: str) -> None:
    answer = timed(url, ONE, cache=False)
    samples, rate = audio_of(answer)
    assert [w["word"] for w in answer["words"]] == ONE.split()
    in_order_within(answer["words"], samples.size / rate)
    check_against_sphinx(answer)


def test_speed_two_halves_the_times_and_they_still_match_the_audio(url: str) -> None:
    normal, fast = timed(url, ONE, cache=False), timed(url, ONE, speed=2.0, cache=False)
    check_against_sphinx(fast)  # the times describe the faster audio the client gets
    # piper's durations are drawn afresh each time (its noise), so the halving holds on the whole
    ratio = fast["words"][-1]["end"] / normal["words"][-1]["end"]
    assert 0.42 < ratio < 0.58
    assert 0.42 < fast["duration"] / normal["duration"] < 0.58


def test_speed_past_the_voice_is_stretched_and_timed_on_the_stretched_audio(url: str) -> None:
    answer = timed(url, ONE, speed=3.0, cache=False)  # piper does ~2x; the server stretches the rest
    samples, rate = audio_of(answer)
    in_order_within(answer["words"], samples.size / rate)
    assert answer["words"][-1]["end"] > 0.8 * samples.size / rate  # not left on the unstretched clock


def test_three_pieces_run_on_across_the_seams(url: str) -> None:
    answer = timed(url, THREE, cache=False)
    samples, rate = audio_of(answer)
    seconds = samples.size / rate
    segments = answer["segments"]
    assert [s["text"] for s in segments] == [
        "The quick brown fox jumps over the lazy dog.",
        "We bought five apples today.",
        "Then we went home.",
    ]
    assert segments[0]["start"] == 0.0 and abs(segments[-1]["end"] - seconds) < 0.002
    assert all(a["end"] == b["start"] for a, b in zip(segments, segments[1:], strict=False))
    in_order_within(answer["words"], seconds)
    for segment in segments:  # each piece's words inside its bounds
        inside = [w for w in answer["words"] if segment["start"] <= w["start"] < segment["end"]]
        assert " ".join(w["word"] for w in inside) == segment["text"]
    check_against_sphinx(answer)  # the later pieces' words too: the seams did not shift them


def test_words_are_the_clients_before_normalisation(url: str) -> None:
    answer = timed(url, "We bought 5 kg of apples on 3/4/2021.", cache=False)
    words = [w["word"] for w in answer["words"]]
    assert words == ["We", "bought", "5 kg", "of", "apples", "on", "3/4/2021."]
    five_kg = answer["words"][2]
    assert five_kg["end"] - five_kg["start"] > 0.5  # "five kilograms" was spoken in that time


def test_sse_sends_each_pieces_words_then_all_of_them_at_done(url: str) -> None:
    body = {"input": THREE, "response_format": "mp3", "stream_format": "sse", "cache": False}
    body["timestamp_granularities"] = ["word"]
    events = []
    with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=120) as response:
        assert response.status_code == 200
        events = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines() if line]
    kinds = [event["type"] for event in events]
    assert kinds.count("speech.audio.timestamps") == 3 and kinds[-1] == "speech.audio.done"
    streamed = [w for e in events if e["type"] == "speech.audio.timestamps" for w in e["words"]]
    assert "segment" not in events[kinds.index("speech.audio.timestamps")]  # only what was asked
    assert streamed == events[-1]["words"]
    assert [w["word"] for w in streamed] == THREE.split()
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    samples, rate = decode(audio)
    in_order_within(streamed, samples.size / rate)
    # a piece's words come no later than the audio after it: the first piece's before the last delta
    last_delta = max(i for i, kind in enumerate(kinds) if kind == "speech.audio.delta")
    assert kinds.index("speech.audio.timestamps") < last_delta


def test_a_cache_hit_answers_the_same_words(url: str) -> None:
    text = "A cached sentence keeps its words."
    first = httpx.post(
        f"{url}{SPEECH}", json={"input": text, "response_format": "mp3", "timestamp_granularities": ["word"]}
    )
    second = httpx.post(
        f"{url}{SPEECH}", json={"input": text, "response_format": "wav", "timestamp_granularities": ["word"]}
    )
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("MISS", "HIT")
    assert first.json()["words"] == second.json()["words"]
    check_against_sphinx(second.json())  # and they still describe the audio the hit replays


def test_an_entry_without_words_is_not_a_hit_for_a_request_asking_for_them(url: str) -> None:
    text = "First asked without its words."
    plain_answer = httpx.post(f"{url}{SPEECH}", json={"input": text, "stream": False})
    worded = httpx.post(f"{url}{SPEECH}", json={"input": text, "timestamp_granularities": ["word"]})
    again = httpx.post(f"{url}{SPEECH}", json={"input": text, "timestamp_granularities": ["word"]})
    assert [a.headers["x-cache"] for a in (plain_answer, worded, again)] == ["MISS", "MISS", "HIT"]
    assert [w["word"] for w in again.json()["words"]] == text.split()


def test_the_openai_client_asks_with_extra_body(url: str) -> None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        speech = client.audio.speech.create(
            model="tts-1", voice="alloy", input=ONE, response_format="opus",
            extra_body={"timestamp_granularities": ["word"], "cache": False},
        )  # fmt: skip
        answer = json.loads(speech.content)
        samples, rate = decode(base64.b64decode(answer["audio"]))
        assert answer["response_format"] == "opus" and "segments" not in answer
        assert [w["word"] for w in answer["words"]] == ONE.split()
        in_order_within(answer["words"], samples.size / rate)
        with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=ONE, response_format="pcm",
            extra_body={"stream_format": "sse", "timestamp_granularities": ["segment"], "cache": False},
        ) as response:  # fmt: skip
            events = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines() if line]
        assert events[-1]["segments"][0]["text"] == ONE and "words" not in events[-1]


def test_multipart_takes_them_as_repeated_fields(url: str) -> None:
    fields = [("input", ONE), ("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")]
    answer = httpx.post(f"{url}{SPEECH}", files=[(k, (None, v)) for k, v in fields], timeout=120)
    assert answer.status_code == 200, answer.text
    assert [w["word"] for w in answer.json()["words"]] == ONE.split()
    assert len(answer.json()["segments"]) == 1


@pytest.mark.parametrize(
    "field", [["words"], "sentence", [1], {"word": True}], ids=["plural", "string", "number", "object"]
)
def test_a_bad_granularity_is_a_400_naming_the_field(url: str, field) -> None:
    answer = httpx.post(f"{url}{SPEECH}", json={"input": ONE, "timestamp_granularities": field})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "timestamp_granularities" and error["type"] == "invalid_request_error"


def test_subtitles_cannot_be_sse(url: str) -> None:
    body = {"input": ONE, "response_format": "vtt", "stream_format": "sse"}
    answer = httpx.post(f"{url}{SPEECH}", json=body)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "response_format"


def _cues(text: str) -> list[tuple[float, float, str]]:
    stamp = r"(\d\d):(\d\d):(\d\d)[,.](\d{3})"
    found = re.findall(rf"{stamp} --> {stamp}\n(.+)", text)

    def seconds(h: str, m: str, s: str, ms: str) -> float:
        return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000

    return [(seconds(*row[0:4]), seconds(*row[4:8]), row[8]) for row in found]


def test_srt_has_a_cue_per_piece_and_vtt_a_cue_per_word_when_words_are_asked(url: str) -> None:
    srt = httpx.post(f"{url}{SPEECH}", json={"input": THREE, "response_format": "srt"}, timeout=120)
    assert srt.headers["content-type"].startswith("application/x-subrip")
    cues = _cues(srt.text)
    assert [cue for _, _, cue in cues] == [
        "The quick brown fox jumps over the lazy dog.", "We bought five apples today.", "Then we went home.",
    ]  # fmt: skip
    assert srt.text.startswith("1\n") and all(a[1] == b[0] for a, b in zip(cues, cues[1:], strict=False))
    vtt = httpx.post(
        f"{url}{SPEECH}",
        json={"input": THREE, "response_format": "vtt", "timestamp_granularities": ["word"]},
        timeout=120,
    )
    assert vtt.headers["content-type"].startswith("text/vtt") and vtt.text.startswith("WEBVTT\n")
    words = _cues(vtt.text)
    assert [cue for _, _, cue in words] == THREE.split()
    assert all(start <= end for start, end, _ in words)
    # the same answer (a cache hit): the words lie inside their pieces' cues
    assert words[-1][1] <= cues[-1][1] + 0.001 and words[0][0] >= cues[0][0]


def test_a_lexicon_replacement_maps_back_to_the_clients_word(tmp_path) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps({"PyPI": "pie pea eye"}), encoding="utf-8")
    settings = Settings(lexicon_path=lexicon, voices_dir=tmp_path / "voices")
    backend = EmbeddedBackend()
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as base:
        answer = timed(base, "Get it from PyPI today.")
    assert [w["word"] for w in answer["words"]] == ["Get", "it", "from", "PyPI", "today."]
    samples, rate = audio_of(answer)
    starts = sphinx_starts(samples, rate, ["get", "it", "from", "pie", "pea", "eye", "today"])
    pypi = answer["words"][3]  # spoken as three words: from the first's start to the last's end
    assert (
        abs(pypi["start"] - starts[3]) <= WORST_BOUND_S
        and abs(answer["words"][4]["start"] - starts[6]) <= WORST_BOUND_S
    )
    assert pypi["end"] - pypi["start"] > starts[6] - starts[3] - WORST_BOUND_S
