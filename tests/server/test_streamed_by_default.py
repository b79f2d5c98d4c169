"""Answers stream by default, as OpenAI's do: the official `openai` SDK's `with_streaming_response`
gets its first bytes while the rest is still being made, every format's bytes joined are one valid
file, `stream: false` answers one file with Content-Length, and a stream cut by its deadline is
logged and counted as the timeout it is, not as an application error."""

from __future__ import annotations

import io
import logging
import threading
import wave
from collections.abc import Iterator
from contextlib import contextmanager

import av
import httpx
import openai
import pytest
import soundfile

from helpers.audio import decode, duration
from helpers.metrics import scrape, value
from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"
TEXT = "a sentence of fifty characters, more or less, ok!!"  # 50 chars -> 1.0 s of tone
FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"]


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def finished_speech_requests(url: str) -> float:
    """Speech requests the server has finished answering (counted once their last byte is sent)."""
    samples = scrape(url)
    return sum(
        count
        for (name, labels), count in samples.items()
        if name == "polyvox_requests_total" and ("route", SPEECH) in labels
    )


def test_the_sdks_streaming_response_gets_its_first_bytes_before_the_rest_is_made(serve) -> None:
    """OpenAI's own streaming example, unchanged: the engine stops after 0.5 s of a 2 s utterance until
    the client has read its first bytes, so a server that held audio back would never answer."""
    gate = threading.Event()
    backend = FakeBackend(hold_gate=gate, hold_after_s=0.5)
    url = serve(backend)
    chunks: list[bytes] = []
    try:
        with client_for(url).audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT * 2, response_format="pcm"
        ) as response:
            assert "content-length" not in response.headers
            assert response.headers["transfer-encoding"] == "chunked"
            parts = response.iter_bytes()
            chunks.append(next(part for part in parts if part))
            # The first bytes are here while the engine is still generating and the request unfinished.
            assert backend.active == 1
            assert finished_speech_requests(url) == 0
            gate.set()
            chunks.extend(part for part in parts if part)
    finally:
        gate.set()
    assert len(chunks) > 1
    assert finished_speech_requests(url) == 1  # counted as its last chunk went out, before the client had it
    assert duration(b"".join(chunks), "pcm") == pytest.approx(2.0, abs=0.01)


def test_the_embedded_voice_streams_sentence_by_sentence_by_default(embedded_url: str) -> None:
    sentences = " ".join(f"This is sentence number {n} of a longer answer." for n in range(1, 11))
    before = finished_speech_requests(embedded_url)
    chunks: list[bytes] = []
    with client_for(embedded_url).audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input=sentences, response_format="pcm"
    ) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        parts = response.iter_bytes()
        chunks.append(next(part for part in parts if part))
        # Ten sentences are synthesised one after another: the first has arrived, the answer is not done.
        assert finished_speech_requests(embedded_url) == before
        chunks.extend(part for part in parts if part)
    assert len(chunks) > 1
    assert finished_speech_requests(embedded_url) == before + 1
    assert duration(b"".join(chunks), "pcm") > 10 * 1.5  # ten sentences of several words each


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_streamed_joins_into_one_valid_file(serve, fmt: str) -> None:
    """By default, or asked (FLAC, answered whole by default: see test_default_files_read)."""
    url = serve(FakeBackend(chunk_delay_s=0.01))
    chunks: list[bytes] = []
    with client_for(url).audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input=TEXT * 2,
        response_format=fmt,
        extra_body={"stream": True} if fmt == "flac" else None,
    ) as response:
        assert "content-length" not in response.headers
        chunks.extend(part for part in response.iter_bytes() if part)
    assert len(chunks) > 1
    assert duration(b"".join(chunks), fmt) == pytest.approx(2.0, abs=0.15)


def test_a_streamed_wav_reads_whole_in_common_readers(serve) -> None:
    """The streamed header says "size unknown"; PyAV, libsndfile and Python's wave still read it all."""
    url = serve()
    data = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "wav"}).content
    assert data[4:8] == b"\xff\xff\xff\xff"  # the streaming header: sizes unknown
    with av.open(io.BytesIO(data)) as container:
        assert sum(frame.samples for frame in container.decode(audio=0)) == 24000
    samples, rate = soundfile.read(io.BytesIO(data))
    assert (samples.size, rate) == (24000, 24000)
    with wave.open(io.BytesIO(data)) as wav:
        assert len(wav.readframes(10**9)) == 2 * 24000


@pytest.mark.parametrize("fmt", ["wav", "mp3", "pcm"])
def test_stream_false_answers_one_file_with_its_content_length(serve, fmt: str) -> None:
    url = serve(FakeBackend(chunk_delay_s=0.01))
    speech = client_for(url).audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=fmt, extra_body={"stream": False}
    )
    assert speech.response.headers["content-length"] == str(len(speech.content))
    assert duration(speech.content, fmt) == pytest.approx(1.0, abs=0.1)
    if fmt == "wav":
        with wave.open(io.BytesIO(speech.content)) as wav:
            assert wav.getnframes() == 24000  # exact sizes in the header


def test_stream_false_in_a_form_body(serve) -> None:
    url = serve()
    response = httpx.post(
        f"{url}{SPEECH}", data={"input": TEXT, "response_format": "flac", "stream": "false"}
    )
    assert response.headers["content-length"] == str(len(response.content))
    samples, rate = decode(response.content)
    assert samples.size == rate == 24000


def test_an_explicit_stream_format_still_streams_and_sse_still_answers_events(serve) -> None:
    url = serve(FakeBackend(chunk_delay_s=0.01))
    body = {"input": TEXT, "response_format": "pcm"}
    with httpx.stream("POST", f"{url}{SPEECH}", json={**body, "stream_format": "audio"}) as audio:
        assert audio.headers["transfer-encoding"] == "chunked"
        assert duration(audio.read(), "pcm") == pytest.approx(1.0, abs=0.01)
    with httpx.stream("POST", f"{url}{SPEECH}", json={**body, "stream_format": "sse"}) as sse:
        assert sse.headers["content-type"].startswith("text/event-stream")
        assert b"speech.audio.done" in sse.read()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured_logs(*names: str) -> Iterator[dict[str, Records]]:
    """What these loggers log inside the block (attach after the server starts: uvicorn's logging
    configuration replaces the handlers of its own loggers)."""
    handlers = {name: Records() for name in names}
    for name, handler in handlers.items():
        logging.getLogger(name).addHandler(handler)
    try:
        yield handlers
    finally:
        for name, handler in handlers.items():
            logging.getLogger(name).removeHandler(handler)


def test_a_stream_cut_by_its_deadline_is_a_timeout_not_an_application_error(serve) -> None:
    """The engine stalls after 0.2 s of audio; the deadline passes after the first bytes went out."""
    gate = threading.Event()
    backend = FakeBackend(hold_gate=gate, hold_after_s=0.2)
    url = serve(backend, request_timeout_s=1.5)
    try:
        with (
            captured_logs("uvicorn.error", "polyvox.server.speech.streaming") as server_logs,
            pytest.raises(httpx.RemoteProtocolError),  # cut short: never a complete-looking file
            httpx.stream(
                "POST", f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"}
            ) as response,
        ):
            assert response.status_code == 200
            response.read()
    finally:
        gate.set()
    samples = scrape(url)
    assert value(samples, "polyvox_errors_total", type="timeout") == 1
    assert value(samples, "polyvox_errors_total", type="internal_error") == 0
    assert value(samples, "polyvox_requests_in_flight") == 0
    assert backend.active == 0 and backend.cancelled_requests == 1
    uvicorn_errors = [r for r in server_logs["uvicorn.error"].records if r.levelno >= logging.ERROR]
    assert uvicorn_errors == []  # no "Exception in ASGI application" traceback
    (warning,) = server_logs["polyvox.server.speech.streaming"].records
    assert warning.levelno == logging.WARNING and "deadline" in warning.getMessage()
    assert httpx.post(f"{url}{SPEECH}", json={"input": "still serving", "stream": False}).status_code == 200
