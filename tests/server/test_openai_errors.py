"""Errors and limits as OpenAI reports them, through a real server and the official `openai` SDK:
over-long text is a 400 naming its field (so the SDK raises BadRequestError), a string that is not
text (a lone UTF-16 surrogate) and JSON nested past the parser's depth are 400s rather than 500s, and
an unknown `model` is a 404 `model_not_found` unless the server accepts any model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import httpx
import openai
import pytest

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"
MAX_CHARS = 100


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeBackend]]:
    backend = FakeBackend()
    with running_server(create_app(Settings(max_input_chars=MAX_CHARS), backend)) as url:
        yield url, backend


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def assert_still_serving(url: str) -> None:
    response = httpx.post(f"{url}{SPEECH}", json={"input": "still here", "response_format": "wav"})
    assert response.status_code == 200 and len(response.content) > 44


def post_raw(url: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}{SPEECH}", content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("input", {"input": "a" * (MAX_CHARS + 1)}),
        ("instructions", {"instructions": "b" * (MAX_CHARS + 1)}),
        ("ref_text", {"extra_body": {"ref_text": "c" * (MAX_CHARS + 1)}}),
    ],
)
def test_over_long_text_is_a_bad_request_naming_its_field(server, field: str, extra: dict) -> None:
    url, backend = server
    started = backend.started_requests
    fields = {"model": "tts-1", "voice": "alloy", "input": "hi", **extra}
    with pytest.raises(openai.BadRequestError) as refused:
        client_for(url).audio.speech.create(**fields)
    error = refused.value.body
    assert (error["param"], error["code"]) == (field, f"{field}_too_long")
    assert str(MAX_CHARS) in error["message"]
    assert backend.started_requests == started  # refused before the engine


def test_text_at_the_limit_is_served(server) -> None:
    url, _ = server
    speech = client_for(url).audio.speech.create(
        model="tts-1", voice="alloy", input="a" * MAX_CHARS, instructions="b" * MAX_CHARS
    )
    assert speech.content


# Valid JSON, each with a lone UTF-16 low surrogate (\udc80) in one string field.
SURROGATE_BODIES = [
    (r'{"input": "hi", "instructions": "\udc80"}', "instructions"),
    (r'{"input": "hi \udc80 there"}', "input"),
    (r'{"input": "hi", "voice": "\udc80"}', "voice"),
    (r'{"input": "hi", "voice": {"id": "al\udc80loy"}}', "voice"),
    (r'{"input": "hi", "model": "\udc80"}', "model"),
    (r'{"input": "hi", "ref_text": "\udc80"}', "ref_text"),
    (r'{"input": "hi", "reference_text": "\udc80"}', "reference_text"),
    (r'{"input": "hi", "response_format": "\udc80"}', "response_format"),
]


@pytest.mark.parametrize(("body", "param"), SURROGATE_BODIES)
def test_a_lone_surrogate_in_any_string_field_is_a_400_naming_it(server, body: str, param: str) -> None:
    url, _ = server
    assert "\udc80" in json.dumps(json.loads(body), ensure_ascii=False)  # valid JSON, a lone surrogate
    response = post_raw(url, body.encode())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert_still_serving(url)


@pytest.mark.parametrize("depth", ["just past", 100_000])
@pytest.mark.parametrize("where", ["top level", "inside a field"])
def test_json_nested_past_the_parsers_depth_is_invalid_json(server, depth: int | str, where: str) -> None:
    url, _ = server
    if depth == "just past":
        # The parser's depth is the interpreter's recursion limit, which a library imported by an earlier test
        # in this process may have raised (torch._dynamo does): go just past whatever it is now.
        depth = sys.getrecursionlimit() + 500
    nested = b"[" * depth + b"]" * depth
    body = nested if where == "top level" else b'{"input": "hi", "extra": ' + nested + b"}"
    response = post_raw(url, body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert_still_serving(url)


def test_json_nested_within_the_parsers_depth_is_served(server) -> None:
    url, _ = server
    response = post_raw(url, b'{"input": "hi", "extra": ' + b"[" * 200 + b"]" * 200 + b"}")
    assert response.status_code == 200


def test_an_unknown_model_is_not_found_as_openai_answers(server) -> None:
    url, _ = server
    with pytest.raises(openai.NotFoundError) as missing:
        client_for(url).audio.speech.create(model="tts-9000", voice="alloy", input="hi")
    assert (missing.value.body["param"], missing.value.body["code"]) == ("model", "model_not_found")
    assert_still_serving(url)


def test_every_listed_model_is_served(server) -> None:
    url, _ = server
    client = client_for(url)
    listed = [model.id for model in client.models.list()]
    assert {"polyvox-fake", "fake", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(listed)
    for model in listed:
        assert client.audio.speech.create(model=model, voice="alloy", input="hi").content


def test_accept_any_model_serves_any_model_id(serve) -> None:
    url = serve(accept_any_model=True)
    speech = client_for(url).audio.speech.create(model="my-favourite-model", voice="alloy", input="hi")
    assert speech.content
