"""Property-based fuzzing of the whole HTTP API with schemathesis, from the server's own OpenAPI
schema, against a real uvicorn server: no generated request may get a 5xx or crash the server.
Once with the tone engine (more examples) and briefly with the embedded voice."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings


def _schema(app) -> Iterator:
    with running_server(app) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        yield schema
        assert httpx.get(f"{url}/health").status_code == 200  # still alive after the fuzzing


def _settings(tmp_path_factory, **overrides) -> Settings:
    state = tmp_path_factory.mktemp("fuzz")
    return Settings(
        cache_enabled=True, cache_dir=state / "cache", voices_dir=state / "voices", max_queue=64, **overrides
    )


@pytest.fixture(scope="module")
def fake_schema(tmp_path_factory):
    # 2 ms of tone per character keeps even 4,096-character inputs quick to encode.
    yield from _schema(create_app(_settings(tmp_path_factory), FakeBackend(seconds_per_char=0.002)))


@pytest.fixture(scope="module")
def embedded_schema(tmp_path_factory):
    embedded = pytest.importorskip("polyvox.backends.embedded")
    app = create_app(_settings(tmp_path_factory, max_input_chars=200), embedded.EmbeddedBackend())
    yield from _schema(app)


FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _check(case) -> None:
    response = case.call(timeout=60)
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])
    case.validate_response(response, checks=[not_a_server_error])


def _fuzz(schema, examples: int, path_contains: str = "") -> int:
    """Run `examples` generated cases against every operation (whose path contains `path_contains`)."""
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if path_contains not in operation.path:
            continue
        operations += 1

        @settings(FUZZ, max_examples=examples)
        @given(case=operation.as_strategy())
        def fuzz(case) -> None:
            _check(case)

        fuzz()
    return operations


def test_fuzzed_requests_never_get_a_5xx_with_the_tone_engine(fake_schema) -> None:
    assert _fuzz(fake_schema, 40) >= 8


def test_fuzzed_speech_requests_never_get_a_5xx_with_the_embedded_voice(embedded_schema) -> None:
    assert _fuzz(embedded_schema, 10, path_contains="speech") >= 2
