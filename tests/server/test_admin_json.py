"""Admin routes whose bodies FastAPI parses (the lexicon) answer malformed or deeply nested JSON as the
speech route does: 400 `invalid_json` in OpenAI's shape, and the server goes on serving."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

LEXICON = "/admin/lexicon"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    settings = Settings()
    backend = FakeBackend()
    with running_server(create_app(settings, backend, build_text_pipeline(settings, backend))) as url:
        yield url


def _post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{url}{LEXICON}", content=body, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"term": "SQL", "say": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
        b"{nope",
    ],
    ids=["nested at the top", "nested in a field", "not JSON"],
)
def test_a_lexicon_body_that_is_not_usable_json_is_invalid_json(url: str, body: bytes) -> None:
    response = _post(url, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_json" and error["type"] == "invalid_request_error"
    assert error["message"]
    added = _post(url, b'{"term": "SQL", "say": "sequel"}')
    assert added.status_code == 201, added.text
    assert {"term": "SQL", "say": "sequel", "case_sensitive": False} in httpx.get(f"{url}{LEXICON}").json()[
        "data"
    ]
