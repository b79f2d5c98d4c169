"""Streaming `POST /v1/audio/speech` with the tiny VoxCPM2 engine behind the text front end: SSE and
chunked audio in every format, speed, cloning, long mixed-language text, per-request normalisation,
parenthesised input, and a client that leaves mid-stream."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import openai
import pytest

from helpers.audio import decode, pcm_samples
from polyvox.audio import formats

from .conftest import LONG_WORD, PATCH_SAMPLES, PATCHES, poll_until, tone_wav

TWO_SENTENCES = "The harbour lights came on at dusk. 渔船慢慢地回到了港口。"


def sse_events(body: str) -> list[dict]:
    """Every `data:` event of an SSE body, checking the framing as it goes."""
    events = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        events.append(json.loads(block.removeprefix("data: ")))
    return events


def test_sse_events_are_well_formed_and_carry_the_same_audio_as_an_unstreamed_request(server):
    url, backend = server
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    whole = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TWO_SENTENCES, response_format="pcm", extra_body={"seed": 11}
    ).content
    spoken = sum(len(text) for text in backend.texts)
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input=TWO_SENTENCES,
        response_format="pcm",
        stream_format="sse",
        extra_body={"seed": 11},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.read().decode())

    kinds = [event["type"] for event in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"}
    assert len(kinds) > 2  # audio arrived in several deltas, not one
    streamed = b"".join(base64.b64decode(event["audio"]) for event in events[:-1])
    assert len(backend.texts) == 4  # two pieces per request
    # Equal up to the 16-bit rounding of float differences in the last bit (batches differ run to run).
    assert len(streamed) == len(whole)
    np.testing.assert_allclose(pcm_samples(streamed), pcm_samples(whole), rtol=0, atol=2 / 32768)
    assert len(whole) == 2 * 2 * PATCHES * PATCH_SAMPLES // 2  # 2 pieces, 24 kHz 16-bit
    usage = events[-1]["usage"]
    assert usage["input_tokens"] == spoken  # the characters the engine was given
    assert usage["output_tokens"] == round(2 * PATCHES * 0.16 * 50)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_chunked_audio_in_every_format_decodes_at_the_requested_speed(server, fmt):
    url, _ = server
    payload = {"input": TWO_SENTENCES, "response_format": fmt, "stream_format": "audio", "speed": 2.0}
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=payload, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == formats.resolve(fmt, None)[0].content_type(24000)
        assert response.headers.get("transfer-encoding") == "chunked"
        body = b"".join(response.iter_raw())
    seconds = 2 * PATCHES * 0.16 / 2.0
    if fmt == "pcm":
        samples, rate = pcm_samples(body), 24000
    else:
        samples, rate = decode(body)
    assert np.isfinite(samples).all() and np.abs(samples).max() > 0
    # Time-stretching ends on whole frames (~10 ms); lossy codecs also pad their first and last frames.
    slack = 0.02 if fmt in ("pcm", "wav", "flac") else 0.1
    assert abs(samples.size / rate - seconds) <= slack, (fmt, samples.size / rate)


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
def test_sse_deltas_in_every_container_format_join_into_a_file_that_decodes(server, fmt):
    url, _ = server
    payload = {"input": TWO_SENTENCES, "response_format": fmt, "stream_format": "sse", "speed": 1.5}
    response = httpx.post(f"{url}/v1/audio/speech", json=payload, timeout=120)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    assert [event["type"] for event in events][-1] == "speech.audio.done"
    samples, rate = decode(b"".join(base64.b64decode(event["audio"]) for event in events[:-1]))
    assert np.isfinite(samples).all() and np.abs(samples).max() > 0  # (opus decodes at 48 kHz)
    slack = 0.02 if fmt in ("wav", "flac") else 0.1
    assert abs(samples.size / rate - 2 * PATCHES * 0.16 / 1.5) <= slack, (fmt, samples.size / rate)


@pytest.mark.parametrize("fmt", ["pcm", "wav", "mp3"])
def test_audio_leaves_once_the_first_patch_is_made_even_at_another_speed(server, fmt):
    """Every generation is held after its first 160 ms patch until the client has received audio.

    (Opus pages, AAC priming and FLAC blocks hold a format's first bytes back for up to one more patch.)"""
    url, backend = server
    backend.hold_after_first_chunk = True
    payload = {"input": "One patch so far.", "response_format": fmt, "stream_format": "audio", "speed": 1.5}
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=payload, timeout=120) as response:
        assert response.status_code == 200
        parts = response.iter_raw()
        first = next(parts)
        backend.release.set()
        rest = b"".join(parts)
    if fmt == "mp3":  # one MPEG frame is too short to decode alone: check it is an audio frame
        assert first[0] == 0xFF and first[1] & 0xE0 == 0xE0
    else:
        heard = pcm_samples(first) if fmt == "pcm" else decode(first)[0]
        assert heard.size > 0 and np.abs(heard).max() > 0
    assert len(rest) > 0


def test_streams_with_a_one_off_clone_on_uttera_tts_vllms_stream_route(server):
    url, backend = server
    files = {"speaker_wav": ("me.wav", tone_wav(), "audio/wav")}
    data = {"input": "Cloned and streamed at once.", "seed": "5"}
    with httpx.stream(
        "POST", f"{url}/v1/audio/speech/stream", data=data, files=files, timeout=120
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "audio/wav"
        assert response.headers["x-route"] == "ADHOC"
        body = b"".join(response.iter_raw())
    samples, rate = decode(body)
    assert rate == 24000 and samples.size == PATCHES * PATCH_SAMPLES // 2
    assert backend.requests[0].reference is not None


MIXED_PARAGRAPH = (
    "In 2023 the museum on Harbour Street reopened after 18 months of repairs. "
    "博物馆在港口街重新开放，修缮工作历时十八个月。 "
    "Visitors queued from 9 a.m., and the first 100 received a free guide. "
    "第一批游客在上午九点就排起了长队。 "
    "The new east wing holds 1,200 paintings, drawings and maps. "
    "新的东翼收藏了一千二百幅画作、素描和地图。 "
)


def test_four_thousand_characters_of_mixed_text_stream_to_the_end_and_start_early(server):
    url, backend = server
    text = (MIXED_PARAGRAPH * 40)[:4000].rstrip()
    backend.hold = lambda request: request.piece >= 2
    payload = {"input": text, "response_format": "pcm", "stream_format": "sse"}
    chunks: list[bytes] = []
    done = None
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=payload, timeout=300) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "speech.audio.delta":
                if not chunks:
                    # Pieces 2 onwards are held until now: the first audio cannot wait for the last piece.
                    assert len(backend.requests) <= 2
                    backend.release.set()
                chunks.append(base64.b64decode(event["audio"]))
            else:
                done = event
    pieces = len(backend.requests)
    assert pieces > 40
    assert [r.piece for r in backend.requests] == list(range(pieces))
    assert done is not None and done["type"] == "speech.audio.done"
    assert done["usage"]["input_tokens"] == sum(len(t) for t in backend.texts)
    # Every piece speaks with the one frozen prompt of the request's builtin voice.
    assert len({request.reference.content_hash for request in backend.requests if request.reference}) == 1
    assert all(request.reference is not None for request in backend.requests)
    audio = b"".join(chunks)
    assert len(audio) == pieces * PATCHES * PATCH_SAMPLES  # every piece, 16-bit at 24 kHz
    spoken = " ".join(backend.texts)
    assert "eighteen months" in spoken  # normalised: numbers are read as words
    assert not any(char.isdigit() for char in spoken)


def test_normalisation_can_be_turned_off_per_request(server):
    url, backend = server
    for normalize in (None, False, True):
        payload = {"input": "Bring 3 chairs.", "response_format": "pcm"}
        if normalize is not None:
            payload["normalize"] = normalize
        assert httpx.post(f"{url}/v1/audio/speech", json=payload, timeout=60).status_code == 200
    default, off, on = backend.texts
    assert "3" in off and "three" not in off.lower()
    assert "three" in on.lower() and "3" not in on
    assert default == on


def test_a_parenthesised_input_is_read_aloud_and_never_taken_as_a_voice_description(server):
    url, backend = server
    text = "(whispering) Meet me at noon. (笑) 好的。"
    response = httpx.post(
        f"{url}/v1/audio/speech", json={"input": text, "response_format": "pcm"}, timeout=60
    )
    assert response.status_code == 200
    assert backend.texts and all(not piece.lstrip().startswith(("(", "（")) for piece in backend.texts)
    joined = " ".join(backend.texts)
    assert "whispering" in joined and "笑" in joined
    assert all(request.instructions is None for request in backend.requests)

    backend.reset()
    httpx.post(
        f"{url}/v1/audio/speech",
        json={"input": "Meet me at noon.", "instructions": "a calm voice", "response_format": "pcm"},
        timeout=60,
    )
    assert backend.requests[0].instructions == "a calm voice" and backend.texts == ["Meet me at noon."]


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_a_client_leaving_mid_stream_cancels_its_generation_and_frees_its_kv_blocks(server, stream_format):
    url, backend = server
    stats = backend.inner.stats
    before = stats().patches
    payload = {
        "input": f"This is a {LONG_WORD} sentence.",
        "response_format": "pcm",
        "stream_format": stream_format,
    }
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=payload, timeout=120) as response:
        assert response.status_code == 200
        # the iterator is kept until the client leaves: one dropped at once closes it, and its connection
        # with it (the server could cancel the request before the poll below first looked)
        received = response.iter_raw()
        next(received)
        # the engine's counters are read from this thread while its step loop runs: wait for a reading
        # that shows the request held (its 300 patches take far longer than that)
        held = lambda: stats().running == 1 and stats().kv_blocks_used > 0  # noqa: E731
        poll_until(held, "the engine holds it", seen=stats)
    poll_until(lambda: stats().running == 0 and stats().waiting == 0, "the request leaves the engine")
    assert stats().kv_blocks_used == 0
    assert stats().patches - before < 300 // 2  # cut short, not run to its end
