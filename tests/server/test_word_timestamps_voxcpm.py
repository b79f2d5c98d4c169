"""Word timestamps from the tiny random VoxCPM2 (its audio is noise, not speech), stepping in a thread
behind a real server on loopback: the plumbing. Every word the client sent is there, in order, inside
its piece, and the pieces' bounds are exact (each piece spoken alone, with the same seed, lasts what
its segment says); the same words whole, streamed (SSE) and from the cache; each aligner the `aligner`
setting names (estimate, pocketsphinx) gives words within their pieces."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest

from helpers.audio import decode
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"
TEXT = "We bought 5 kg of apples. They were red. Then we went home."
PIECES = ["We bought 5 kg of apples.", "They were red.", "Then we went home."]
# the client's words: "5 kg", spoken "five kilograms", is one
WORDS = [["We", "bought", "5 kg", "of", "apples."], ["They", "were", "red."], ["Then", "we", "went", "home."]]


def tiny(tmp_path_factory, **overrides) -> Settings:
    return Settings(
        random_weights="tiny", device="cpu", engine_process=False, num_kv_blocks=512, cache_enabled=True,
        cache_dir=tmp_path_factory.mktemp("cache"), voices_dir=tmp_path_factory.mktemp("voices"), **overrides,
    )  # fmt: skip


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    with running_server(create_app(tiny(tmp_path_factory))) as base:
        yield base


# The tiny random model's noise decides how long it speaks: with seed 3 TEXT is 2.9 s of audio (seed 7,
# before, 10.6 s: each request cost three and a half times the CPU for the same checks)
SEED = 3


def speak(url: str, text: str = TEXT, **fields) -> httpx.Response:
    body = {"input": text, "seed": SEED, "response_format": "wav", **fields}
    answer = httpx.post(f"{url}{SPEECH}", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer


def timed(url: str, text: str = TEXT, **fields) -> dict:
    return speak(url, text, timestamp_granularities=["word", "segment"], **fields).json()


def seconds_of(answer: dict) -> float:
    samples, rate = decode(base64.b64decode(answer["audio"]))
    return samples.size / rate


def check_plumbing(answer: dict, seconds: float) -> None:
    """Every word, in order, inside its piece; the pieces end to end over the whole answer."""
    words, segments = answer["words"], answer["segments"]
    assert [w["word"] for w in words] == [word for piece in WORDS for word in piece]
    assert [s["text"] for s in segments] == PIECES
    assert segments[0]["start"] == 0.0 and abs(segments[-1]["end"] - seconds) < 0.002
    assert all(a["end"] == b["start"] for a, b in zip(segments, segments[1:], strict=False))
    at = 0
    for segment, piece in zip(segments, WORDS, strict=True):
        count = len(piece)
        for word in words[at : at + count]:
            assert segment["start"] <= word["start"] <= word["end"] <= segment["end"], (word, segment)
        at += count
    assert all(a["end"] <= b["start"] for a, b in zip(words, words[1:], strict=False))


def test_every_word_in_order_inside_its_piece(url: str) -> None:
    answer = timed(url, cache=False)
    check_plumbing(answer, seconds_of(answer))
    assert all(w["approximate"] for w in answer["words"])  # the default aligner, estimate, says so
    assert answer["words"][2]["word"] == "5 kg"  # spoken "five kilograms": one word of the client's


def test_the_pieces_bounds_are_exact(url: str) -> None:
    segments = timed(url, cache=False)["segments"]
    for segment, piece in zip(segments, PIECES, strict=True):
        alone, rate = decode(speak(url, piece, cache=False, stream=False).content)  # the same seed
        assert abs((segment["end"] - segment["start"]) - alone.size / rate) < 0.002


def test_the_same_words_whole_streamed_and_from_the_cache(url: str) -> None:
    whole = speak(url, timestamp_granularities=["word", "segment"])
    hit = speak(url, timestamp_granularities=["word", "segment"], response_format="mp3")
    assert (whole.headers["x-cache"], hit.headers["x-cache"]) == ("MISS", "HIT")
    assert hit.json()["words"] == whole.json()["words"]
    assert hit.json()["segments"] == whole.json()["segments"]
    body = {"input": TEXT, "seed": SEED, "response_format": "pcm", "stream_format": "sse", "cache": False}
    body["timestamp_granularities"] = ["word", "segment"]
    with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=300) as response:
        events = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines() if line]
    pieces = [e for e in events if e["type"] == "speech.audio.timestamps"]
    assert [p["segment"]["text"] for p in pieces] == PIECES
    assert [w for p in pieces for w in p["words"]] == events[-1]["words"] == whole.json()["words"]
    assert events[-1]["segments"] == whole.json()["segments"]


@pytest.fixture(scope="module")
def sphinx_url(tmp_path_factory) -> Iterator[str]:
    pytest.importorskip("pocketsphinx")
    with running_server(create_app(tiny(tmp_path_factory, aligner="pocketsphinx"))) as base:
        yield base


def test_pocketsphinx_gives_words_within_their_pieces_even_in_noise(sphinx_url: str) -> None:
    answer = timed(sphinx_url, cache=False)
    check_plumbing(answer, seconds_of(answer))


@pytest.fixture(scope="module")
def ctc_url(tmp_path_factory) -> Iterator[str]:
    from alignment.test_aligner_ctc import tiny_ctc_checkpoint  # a tiny random wav2vec2 CTC model

    checkpoint = tiny_ctc_checkpoint(str(tmp_path_factory.mktemp("ctc")))
    with running_server(create_app(tiny(tmp_path_factory, aligner=checkpoint))) as base:
        yield base


def test_a_ctc_model_gives_words_within_their_pieces(ctc_url: str) -> None:
    answer = timed(ctc_url, cache=False)
    check_plumbing(answer, seconds_of(answer))


def test_an_aligner_that_cannot_be_built_stops_the_start(tmp_path_factory) -> None:
    from polyvox.runtime.startup import StartupError

    with pytest.raises(StartupError):
        create_app(tiny(tmp_path_factory, aligner=str(tmp_path_factory.mktemp("empty"))))
