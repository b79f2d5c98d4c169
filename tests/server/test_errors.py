"""Every error answers in OpenAI's shape, with the right status and the parameter at fault, and the
server keeps serving afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

MAX_CHARS = 100
MAX_BYTES = 4096


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    settings = Settings(max_input_chars=MAX_CHARS, max_request_bytes=MAX_BYTES)
    with running_server(create_app(settings, FakeBackend())) as base:
        yield base


def assert_openai_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    return error


def assert_still_serving(url: str) -> None:
    response = httpx.post(f"{url}/v1/audio/speech", json={"input": "still here", "response_format": "wav"})
    assert response.status_code == 200
    assert len(response.content) > 44


JSON_CASES = [
    ("empty input", {"input": ""}, 400, "input"),
    ("blank input", {"input": "   \n"}, 400, "input"),
    ("missing input", {"voice": "alloy"}, 400, "input"),
    ("input too long", {"input": "a" * (MAX_CHARS + 1)}, 400, "input"),
    ("unknown voice", {"input": "hi", "voice": "darth"}, 400, "voice"),
    ("unknown format", {"input": "hi", "response_format": "ogg"}, 400, "response_format"),
    ("speed too low", {"input": "hi", "speed": 0.2}, 400, "speed"),
    ("speed too high", {"input": "hi", "speed": 4.5}, 400, "speed"),
    ("speed not a number", {"input": "hi", "speed": "fast"}, 400, "speed"),
    ("unknown stream format", {"input": "hi", "stream_format": "chunks"}, 400, "stream_format"),
    ("cfg_value too low", {"input": "hi", "cfg_value": 0.4}, 422, "cfg_value"),
    ("cfg_value too high", {"input": "hi", "cfg_value": 5.5}, 422, "cfg_value"),
    ("timesteps zero", {"input": "hi", "inference_timesteps": 0}, 422, "inference_timesteps"),
    ("rate the format cannot carry", {"input": "hi", "response_format": "opus", "sample_rate": 22050}, 400,
     "sample_rate"),
    ("engine refuses the text", {"input": "say [reject] this"}, 422, "input"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "param"), [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES]
)
def test_invalid_json_request_gets_openai_error(url: str, body: dict, status: int, param: str) -> None:
    assert_openai_error(httpx.post(f"{url}/v1/audio/speech", json=body), status, param)
    assert_still_serving(url)


def test_streamed_request_validation_fails_before_streaming(url: str) -> None:
    body = {"input": "hi", "voice": "darth", "stream_format": "sse"}
    assert_openai_error(httpx.post(f"{url}/v1/audio/speech", json=body), 400, "voice")


def test_malformed_json_is_400(url: str) -> None:
    response = httpx.post(
        f"{url}/v1/audio/speech", content=b'{"input": "hi"', headers={"content-type": "application/json"}
    )
    assert_openai_error(response, 400, None)
    assert_still_serving(url)


def test_json_that_is_not_an_object_is_400(url: str) -> None:
    assert_openai_error(httpx.post(f"{url}/v1/audio/speech", json=["hi"]), 400, None)


def test_unsupported_content_type_is_415(url: str) -> None:
    response = httpx.post(f"{url}/v1/audio/speech", content=b"hello", headers={"content-type": "text/plain"})
    assert_openai_error(response, 415, None)
    assert_still_serving(url)


def test_body_over_the_limit_is_413(url: str) -> None:
    body = {"input": "hi", "instructions": "x" * (2 * MAX_BYTES)}
    assert_openai_error(httpx.post(f"{url}/v1/audio/speech", json=body), 413, None)
    assert_still_serving(url)


def test_form_validation_uses_the_same_rules(url: str) -> None:
    urlencoded = httpx.post(f"{url}/v1/audio/speech", data={"input": "hi", "cfg_value": "9"})
    assert_openai_error(urlencoded, 422, "cfg_value")
    multipart = httpx.post(
        f"{url}/v1/audio/speech", data={"voice": "alloy"}, files={"speaker_notes": ("notes.txt", b"-")}
    )
    assert multipart.request.headers["content-type"].startswith("multipart/form-data")
    assert_openai_error(multipart, 400, "input")


def test_unknown_route_is_404(url: str) -> None:
    assert_openai_error(httpx.get(f"{url}/v1/audio/nothing-here"), 404, None)
    assert_still_serving(url)


def test_wrong_method_is_405(url: str) -> None:
    assert_openai_error(httpx.get(f"{url}/v1/audio/speech"), 405, None)
    assert_openai_error(httpx.delete(f"{url}/v1/models"), 405, None)


def test_engine_failure_is_500_and_server_recovers(url: str) -> None:
    whole = {"input": "x [fail] y", "stream": False}  # a failure before any byte went out
    error = assert_openai_error(httpx.post(f"{url}/v1/audio/speech", json=whole), 500, None)
    assert error["type"] == "server_error"
    assert_still_serving(url)


def test_openai_client_raises_typed_errors(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as bad:
        client.audio.speech.create(model="tts-1", voice="darth", input="hi")
    assert bad.value.body["param"] == "voice"
    with pytest.raises(openai.UnprocessableEntityError) as unprocessable:
        client.audio.speech.create(model="tts-1", voice="alloy", input="hi", extra_body={"cfg_value": 7})
    assert unprocessable.value.body["param"] == "cfg_value"
    with pytest.raises(openai.InternalServerError):
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="boom [fail] boom", extra_body={"stream": False}
        )
    speech = client.audio.speech.create(
        model="tts-1", voice="alloy", input="fine again", response_format="wav"
    )
    assert speech.content[:4] == b"RIFF"
