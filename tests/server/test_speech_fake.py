"""The speech protocol end to end with the tone engine: formats, fields reaching the engine, speed,
sample rate, multipart bodies, chunked streaming and SSE, through a real server and the openai client."""

from __future__ import annotations

import base64
import io
import json
import math
import threading
import wave

import httpx
import openai
import pytest

from helpers.audio import decode, duration, pcm_samples
from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"
TEXT = "a sentence of fifty characters, more or less, ok!!"  # 50 chars -> 1.0 s of tone


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_openai_client_default_is_mp3_at_24k(serve) -> None:
    url = serve()
    speech = client_for(url).audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
    assert speech.response.headers["content-type"] == "audio/mpeg"
    samples, rate = decode(speech.content)
    assert rate == 24000
    assert samples.size / rate == pytest.approx(1.0, abs=0.1)


def test_request_fields_reach_the_engine(serve) -> None:
    backend = FakeBackend()
    url = serve(backend)
    client_for(url).audio.speech.create(
        model="tts-1",
        voice="nova",
        input=TEXT,
        instructions="whisper it",
        response_format="wav",
        extra_body={"seed": 7, "cfg_value": 1.5, "inference_timesteps": 4},
    )
    request = backend.last_request
    assert (request.text, request.voice, request.instructions) == (TEXT, "nova", "whisper it")
    assert (request.seed, request.cfg_value, request.inference_timesteps) == (7, 1.5, 4)


@pytest.mark.parametrize("speed", [0.5, 2.0])
def test_speed_is_applied_by_the_pipeline_for_engines_without_native_speed(serve, speed: float) -> None:
    backend = FakeBackend()
    url = serve(backend)
    body = {"input": TEXT, "response_format": "pcm", "speed": speed}
    plain = httpx.post(f"{url}{SPEECH}", json=body)
    streamed = httpx.post(f"{url}{SPEECH}", json={**body, "stream_format": "audio"})
    assert backend.last_request.speed == 1.0
    for response in (plain, streamed):
        assert duration(response.content, "pcm") == pytest.approx(1.0 / speed, rel=0.05)


def test_native_speed_engines_get_the_speed(serve) -> None:
    backend = FakeBackend(native_speed=True)
    url = serve(backend)
    response = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm", "speed": 2.0})
    assert backend.last_request.speed == 2.0
    assert duration(response.content, "pcm") == pytest.approx(0.5, rel=0.05)


def test_sample_rate_extension(serve) -> None:
    url = serve(FakeBackend(sample_rate=48000))
    response = httpx.post(
        f"{url}{SPEECH}", json={"input": TEXT, "response_format": "flac", "sample_rate": 16000}
    )
    samples, rate = decode(response.content)
    assert rate == 16000
    assert samples.size / rate == pytest.approx(1.0, abs=0.05)
    pcm = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"})
    assert pcm.headers["content-type"].startswith("audio/pcm")
    assert "rate=24000" in pcm.headers["content-type"]


def test_non_streamed_wav_has_exact_sizes(serve) -> None:
    url = serve()
    response = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "wav", "stream": False})
    assert response.headers["content-length"] == str(len(response.content))
    with wave.open(io.BytesIO(response.content)) as wav:
        assert wav.getframerate() == 24000
        assert wav.getnframes() == (len(response.content) - 44) // 2


def test_multipart_form_body_is_accepted(serve) -> None:
    backend = FakeBackend()
    url = serve(backend)
    form = {
        "input": TEXT,
        "voice": "echo",
        "response_format": "pcm",
        "speed": "2",
        "cfg_value": "3",
        "cache": "off",
    }
    response = httpx.post(f"{url}{SPEECH}", data=form, files={"speaker_notes": ("notes.txt", b"-")})
    assert response.request.headers["content-type"].startswith("multipart/form-data")
    assert response.status_code == 200, response.text
    assert duration(response.content, "pcm") == pytest.approx(0.5, rel=0.05)
    assert (backend.last_request.voice, backend.last_request.cfg_value) == ("echo", 3.0)


def test_clone_upload_reaches_the_engine_which_may_refuse_it(serve) -> None:
    url = serve()
    wav = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "wav"}).content
    refused = httpx.post(f"{url}{SPEECH}", data={"input": "hi"}, files={"speaker_wav": ("ref.wav", wav)})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "cloning_unsupported"
    garbage = httpx.post(
        f"{url}{SPEECH}", data={"input": "hi"}, files={"custom_voice_file": ("x.wav", b"nope")}
    )
    assert garbage.status_code == 400
    assert garbage.json()["error"]["param"] == "custom_voice_file"


def test_voice_object_form_is_accepted(serve) -> None:
    url = serve()
    response = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "voice": {"id": "cedar"}})
    assert response.status_code == 200


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_chunked_stream_arrives_in_pieces_and_decodes(serve, fmt: str) -> None:
    url = serve(FakeBackend(chunk_delay_s=0.01))
    client = client_for(url)
    chunks: list[bytes] = []
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input=TEXT * 2,
        response_format=fmt,
        extra_body={"stream_format": "audio"},
    ) as response:
        assert "chunked" in response.headers.get("transfer-encoding", "")
        chunks.extend(chunk for chunk in response.iter_bytes() if chunk)
    assert len(chunks) > 1
    assert duration(b"".join(chunks), fmt) == pytest.approx(2.0, abs=0.15)


def test_seed_stream_route_defaults_to_chunked_wav(serve) -> None:
    url = serve()
    with httpx.stream("POST", f"{url}{SPEECH}/stream", json={"input": TEXT}) as response:
        assert response.headers["content-type"] == "audio/wav"
        body = response.read()
    samples, rate = decode(body)
    assert rate == 24000
    assert samples.size / rate == pytest.approx(1.0, abs=0.05)


def read_sse(response: httpx.Response) -> list[dict]:
    events = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            events.append(json.loads(line[len("data: ") :]))
        else:
            assert line == ""
    return events


@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
def test_sse_events_carry_the_file_and_end_with_usage(serve, fmt: str) -> None:
    url = serve(FakeBackend(chunk_delay_s=0.01))
    body = {"input": TEXT, "response_format": fmt, "stream_format": "sse"}
    with httpx.stream("POST", f"{url}{SPEECH}", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_sse(response)
    *deltas, done = events
    assert len(deltas) > 1
    assert {event["type"] for event in deltas} == {"speech.audio.delta"}
    audio = b"".join(base64.b64decode(event["audio"]) for event in deltas)
    seconds = duration(audio, fmt)
    assert seconds == pytest.approx(1.0, abs=0.1)
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["input_tokens"] == len(TEXT)
    assert usage["output_tokens"] == math.ceil(1.0 * 50)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_sse_reports_an_engine_failure_as_an_error_event(serve) -> None:
    url = serve()
    body = {"input": "fails [fail] in the middle of a long enough text", "stream_format": "sse"}
    with httpx.stream("POST", f"{url}{SPEECH}", json=body) as response:
        assert response.status_code == 200
        events = read_sse(response)
    assert events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["type"] == "server_error"


def test_chunked_stream_is_aborted_when_the_engine_fails_mid_way(serve) -> None:
    url = serve()
    body = {"input": "fails [fail] in the middle of a long enough text", "stream_format": "audio"}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", f"{url}{SPEECH}", json=body) as response,
    ):
        response.read()
    assert httpx.post(f"{url}{SPEECH}", json={"input": TEXT}).status_code == 200


def test_pcm_is_16_bit_little_endian(serve) -> None:
    url = serve()
    samples = pcm_samples(
        httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"}).content
    )
    assert 0.25 < float(abs(samples).max()) < 0.35  # the tone's amplitude is 0.3


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_first_bytes_arrive_while_the_rest_is_still_being_made(serve, fmt: str, stream_format: str) -> None:
    """The engine stops after 0.5 s of a 2 s utterance until the client has its first bytes: a server
    that held audio back would time out here."""
    gate = threading.Event()
    backend = FakeBackend(hold_gate=gate, hold_after_s=0.5)
    url = serve(backend)
    body = {"input": TEXT * 2, "response_format": fmt, "stream_format": stream_format}
    try:
        with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=10) as response:
            assert response.status_code == 200
            parts = response.iter_bytes()
            first = next(part for part in parts if part)
            assert backend.active == 1  # still generating: the rest is not made yet
            gate.set()
            rest = b"".join(parts)
    finally:
        gate.set()
    data = first + rest
    if stream_format == "sse":
        events = [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]
        assert events[-1]["type"] == "speech.audio.done"
        data = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert duration(data, fmt) == pytest.approx(2.0, abs=0.15)
