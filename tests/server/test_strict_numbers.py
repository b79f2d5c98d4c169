"""Numbers must be numbers: a JSON `true` (or `"1.5"`) where a speech request, or a WebSocket session's
config, asks for a number is refused naming the field, not read as 1.0; an integer where a float is
asked is a number, and a form's fields, which are all text, are still parsed as numbers."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from websockets.sync.client import connect

from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_a_boolean_speed_is_refused_naming_speed(serve) -> None:
    url = serve(FakeBackend())
    with pytest.raises(openai.BadRequestError) as refused:
        sdk(url).audio.speech.create(model="tts-1", voice="alloy", input="Hello.", speed=True)
    assert refused.value.body["param"] == "speed"
    assert refused.value.body["code"] == "invalid_value"


@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("speed", "1.5", 400),  # a string is not a JSON number either
        ("sample_rate", "24000", 422),
        ("seed", False, 422),  # polyvox's own fields answer 422, as uttera-tts-vllm does
        ("cfg_value", True, 422),
        ("inference_timesteps", True, 422),
        ("seed", 7.5, 422),
    ],
)
def test_numeric_fields_take_only_numbers(serve, field: str, value: object, status: int) -> None:
    url = serve(FakeBackend())
    response = httpx.post(f"{url}{SPEECH}", json={"input": "Hello.", field: value})
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == field


def test_an_integer_is_a_number_and_a_form_field_is_parsed(serve) -> None:
    backend = FakeBackend(native_speed=True)
    url = serve(backend)
    spoken = sdk(url).audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", speed=2, response_format="pcm", extra_body={"seed": 3}
    )
    assert spoken.content and backend.last_request is not None
    assert (backend.last_request.speed, backend.last_request.seed) == (2.0, 3)

    form = {"input": "Hello.", "speed": "1.5", "seed": "11", "sample_rate": "", "response_format": "pcm"}
    assert httpx.post(f"{url}{SPEECH}", data=form).status_code == 200
    assert (backend.last_request.speed, backend.last_request.seed) == (1.5, 11)
    refused = httpx.post(f"{url}{SPEECH}", data={"input": "Hello.", "speed": "true"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "speed"


def test_a_websocket_config_with_a_boolean_speed_is_refused_and_the_session_goes_on(serve) -> None:
    url = serve(FakeBackend())
    with connect(url.replace("http://", "ws://") + f"{SPEECH}/ws") as ws:
        ws.send(json.dumps({"type": "config", "speed": True}))
        error = json.loads(ws.recv(timeout=30))["error"]
        assert (error["param"], error["code"]) == ("speed", "invalid_value")
        ws.send(json.dumps({"type": "config", "speed": 1}))
        assert json.loads(ws.recv(timeout=30))["type"] == "ready"
