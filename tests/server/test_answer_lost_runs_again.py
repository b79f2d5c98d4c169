"""An answer whose audio the engine lost part of (`AudioLost`: the engine process serving it died after
some of its audio had come back) before any of it reached the client is run again from its start, and
the client, through the official openai client, gets the answer it would have had: a stream whose first
chunk made no bytes yet (mp3 holds a short chunk back), and a whole file. One lost after its first
bytes went out is cut, as documented. The real rank deaths, whole files and streams, are in
tests/engine/test_whole_answer_resend.py and test_data_parallel_serving.py."""

from __future__ import annotations

import httpx
import openai
import pytest

from helpers.audio import decode
from helpers.losing_engine import LosingEngine

TEXT = "Lost and found again."


def speech(url: str, stream: bool) -> bytes:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="mp3", extra_body={"stream": stream}
    ) as response:
        return response.read()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_an_answer_lost_before_any_byte_went_out_is_run_again(serve, stream: bool) -> None:
    unharmed = speech(serve(LosingEngine(losses=0, chunk_s=0.005)), stream)
    engine = LosingEngine(losses=1, chunk_s=0.005)  # 120 samples: the mp3 encoder sends nothing yet
    served = speech(serve(engine), stream)
    assert engine.runs == 2
    assert served == unharmed
    assert decode(served)[0].size > 0


def test_a_stream_lost_after_its_first_bytes_is_cut(serve) -> None:
    engine = LosingEngine(losses=1, before_loss=20, chunk_s=0.1)
    url = serve(engine)
    body = {"input": TEXT * 4, "voice": "alloy", "response_format": "pcm"}
    received = bytearray()
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=60) as response,
    ):
        assert response.status_code == 200
        for piece in response.iter_bytes():
            received += piece
    assert received and engine.runs == 1
