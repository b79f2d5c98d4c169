"""The OpenAPI document declares the error answers: every route that needs a key lists 401 and 403,
the routes list the 400/404/409/413/415 they answer, all in OpenAI's error shape, and none keeps
FastAPI's 422 "Validation Error" (its shape is not what the server answers). Real error answers from
a server are each declared for their operation, and their bodies match the declared schema."""

from __future__ import annotations

import httpx
import jsonschema
import pytest

ADMIN = {"Authorization": "Bearer admin-key"}


@pytest.fixture
def server(serve, tmp_path) -> tuple[str, dict]:
    url = serve(admin_api_keys=["admin-key"], voices_dir=tmp_path)  # its named keys stay its own
    return url, httpx.get(f"{url}/openapi.json").json()


def declared(document: dict, method: str, path: str) -> dict:
    return document["paths"][path][method]["responses"]


def test_each_route_that_needs_a_key_declares_401_and_403_in_openais_shape(server) -> None:
    _, document = server
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert "HTTPValidationError" not in str(responses), (method, path)
            if path in ("/health", "/ready", "/metrics"):
                assert "401" not in responses
                continue
            for status in ("401", "403"):
                schema = responses[status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/OpenAIError"}, (method, path, status)


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        ("post", "/v1/audio/speech", {"400", "404", "413", "415", "422", "429", "503"}),
        ("post", "/v1/audio/voices", {"400", "409", "413", "415"}),
        ("get", "/v1/audio/voices/{voice_id}", {"404"}),
        ("post", "/admin/keys", {"400", "409"}),
        ("delete", "/v1/audio/voice_consents/{consent_id}", {"404", "409"}),
    ],
)
def test_routes_declare_the_errors_they_answer(server, method: str, path: str, statuses: set) -> None:
    _, document = server
    assert statuses <= set(declared(document, method, path))


def test_real_error_answers_are_declared_and_match_the_schema(server) -> None:
    url, document = server
    schema = {**document["components"]["schemas"]["OpenAIError"], "components": document["components"]}
    httpx.post(f"{url}/admin/keys", json={"name": "taken"}, headers=ADMIN)
    answers = [
        ("post", "/v1/audio/speech", httpx.post(f"{url}/v1/audio/speech", json={}, headers=ADMIN)),
        (
            "post",
            "/v1/audio/speech",
            httpx.post(
                f"{url}/v1/audio/speech", content=b"hi", headers={**ADMIN, "Content-Type": "text/plain"}
            ),
        ),
        ("post", "/v1/audio/speech", httpx.post(f"{url}/v1/audio/speech", json={"input": "hi"})),
        ("get", "/v1/audio/voices/{voice_id}", httpx.get(f"{url}/v1/audio/voices/nobody", headers=ADMIN)),
        ("post", "/admin/keys", httpx.post(f"{url}/admin/keys", json={"name": "taken"}, headers=ADMIN)),
    ]
    assert [answer.status_code for _, _, answer in answers] == [400, 415, 401, 404, 409]
    for method, path, answer in answers:
        assert str(answer.status_code) in declared(document, method, path), (method, path, answer.status_code)
        jsonschema.validate(answer.json(), schema)
