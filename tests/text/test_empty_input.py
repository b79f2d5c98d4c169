"""Text with nothing to say ("", blanks, punctuation alone) is refused in one place, the text front
end's pieces, with one answer: 400 `empty_input` naming `input`, on every back end and every way of
asking (a whole file, a streamed file, SSE). A real server on loopback, asked with the official
`openai` client: the embedded piper voice, and the tiny random VoxCPM2 stepping in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from helpers.audio import decode
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings

NOTHING_TO_SAY = ["", "   ", "?!..."]
WAYS = {
    "whole": {"response_format": "wav", "extra_body": {"stream": False}},
    "streamed": {"response_format": "wav"},
    "sse": {"response_format": "pcm", "extra_body": {"stream_format": "sse"}},
}


@pytest.fixture(scope="module")
def voxcpm2_url(tmp_path_factory) -> Iterator[str]:
    settings = Settings(
        random_weights="tiny", device="cpu", engine_process=False, num_kv_blocks=256, cache_enabled=False,
        voices_dir=tmp_path_factory.mktemp("voices"),
    )  # fmt: skip
    with running_server(create_app(settings)) as url:
        yield url


@pytest.fixture(params=["embedded", "voxcpm2"])
def client(request) -> Iterator[openai.OpenAI]:
    url = request.getfixturevalue("embedded_url" if request.param == "embedded" else "voxcpm2_url")
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        yield client


def refusal(client: openai.OpenAI, text: str, way: dict[str, Any]) -> tuple[int, Any]:
    speech = client.audio.speech.with_streaming_response
    with (
        pytest.raises(openai.BadRequestError) as refused,
        speech.create(model="tts-1", voice="alloy", input=text, **way) as response,
    ):
        response.read()
    return refused.value.status_code, refused.value.body


def test_text_with_nothing_to_say_gets_one_400_everywhere(client):
    answers = {
        (text, name): refusal(client, text, way) for text in NOTHING_TO_SAY for name, way in WAYS.items()
    }
    status, body = answers["", "whole"]
    assert status == 400
    assert (body["code"], body["param"], body["type"]) == ("empty_input", "input", "invalid_request_error")
    assert all(answer == (status, body) for answer in answers.values()), answers


def test_punctuation_around_a_word_is_spoken(client):
    """The refusal is about having nothing to say, not about punctuation."""
    speech = client.audio.speech.create(
        model="tts-1", voice="alloy", input="?! Yes ...", response_format="wav"
    )
    samples, rate = decode(speech.content)
    assert samples.size > 0 and rate > 0
