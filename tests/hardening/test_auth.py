"""API keys on every route the app serves: 401 without or with a wrong key, 403 for a user key on
admin routes, keys from settings, environment and a key file; health, readiness and metrics open."""

from __future__ import annotations

import re

import httpx
import openai
import pytest
from fastapi.routing import APIRoute

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.tenancy.authorization import OPEN_PATHS, needs_admin
from polyvox.settings import Settings

USER, ADMIN = "user-key", "admin-key"
OPEN = ("/health", "/ready", "/metrics", "/openapi.json", "/docs")


def guarded_app(**settings):
    app = create_app(Settings(**settings), FakeBackend())

    @app.post("/admin/ping", include_in_schema=False)
    async def ping() -> dict[str, str]:  # an admin route of the test's own, so one always exists
        return {"pong": "ok"}

    return app


def _routes(routes, prefix: str = ""):
    for route in routes:
        inner = getattr(route, "original_router", None)  # FastAPI's included routers
        if inner is not None:
            yield from _routes(inner.routes, prefix + getattr(route.include_context, "prefix", ""))
        elif isinstance(route, APIRoute):
            yield prefix + route.path, route.methods


def calls(app) -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, path parameters filled in."""
    found = []
    for path, methods in _routes(app.routes):
        if path not in OPEN_PATHS:
            found += [(method, re.sub(r"\{[^}]+\}", "x", path)) for method in sorted(methods)]
    return found


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def guarded():
    app = guarded_app(api_keys=[USER], admin_api_keys=[ADMIN])
    with running_server(app) as url:
        yield app, url


def test_every_route_refuses_a_missing_or_wrong_key(guarded) -> None:
    app, url = guarded
    routes = calls(app)
    assert ("POST", "/v1/audio/speech") in routes and ("POST", "/admin/ping") in routes
    for method, path in routes:
        for headers in (
            {},
            bearer("wrong"),
            {"Authorization": USER},
            {"Authorization": "Basic dXNlcjpwdw=="},
        ):
            response = httpx.request(method, f"{url}{path}", headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert response.json()["error"]["type"] == "authentication_error"
            assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_user_key_reaches_user_routes_and_gets_403_on_admin_routes(guarded) -> None:
    app, url = guarded
    for method, path in calls(app):
        user = httpx.request(method, f"{url}{path}", headers=bearer(USER))
        admin = httpx.request(method, f"{url}{path}", headers=bearer(ADMIN))
        assert admin.status_code not in (401, 403), (method, path)
        if needs_admin(method, path):
            assert user.status_code == 403, (method, path)
            assert user.json()["error"]["type"] == "permission_error"
        else:
            assert user.status_code not in (401, 403), (method, path)


def test_voice_management_needs_an_admin_key_but_listing_voices_does_not() -> None:
    assert needs_admin("POST", "/v1/audio/voices") and needs_admin("DELETE", "/v1/audio/voices/bob")
    assert needs_admin("POST", "/admin/reload-voices")
    assert not needs_admin("GET", "/v1/audio/voices") and not needs_admin("GET", "/v1/voices")
    assert not needs_admin("POST", "/v1/audio/speech")


def test_health_ready_metrics_and_docs_stay_open(guarded) -> None:
    _, url = guarded
    for path in OPEN:
        assert httpx.get(f"{url}{path}").status_code == 200, path
    assert httpx.head(f"{url}/health").status_code == 200


def test_openai_client_with_user_and_admin_keys(guarded) -> None:
    _, url = guarded
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).models.list()
    for key in (USER, ADMIN):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
        speech = client.audio.speech.create(model="tts-1", voice="alloy", input="hi", response_format="wav")
        assert speech.content[:4] == b"RIFF"


def test_keys_from_environment_file_and_the_legacy_setting(tmp_path, monkeypatch) -> None:
    key_file = tmp_path / "keys.txt"
    key_file.write_text("# team keys\nfrom-file\n\n  spaced-key  \n")
    monkeypatch.setenv("POLYVOX_API_KEYS", "env-one, env-two")
    monkeypatch.setenv("POLYVOX_ADMIN_API_KEYS", '["env-admin"]')
    app = guarded_app(api_keys_file=key_file, api_key="legacy")
    with running_server(app) as url:
        for key in ("from-file", "spaced-key", "env-one", "env-two", "legacy", "env-admin"):
            assert httpx.get(f"{url}/v1/models", headers=bearer(key)).status_code == 200, key
        assert httpx.get(f"{url}/v1/models", headers=bearer("# team keys")).status_code == 401
        assert httpx.post(f"{url}/admin/ping", headers=bearer("env-one")).status_code == 403
        assert httpx.post(f"{url}/admin/ping", headers=bearer("env-admin")).status_code == 200


def test_without_admin_keys_any_api_key_may_administer() -> None:
    with running_server(guarded_app(api_keys=[USER])) as url:
        assert httpx.post(f"{url}/admin/ping").status_code == 401
        assert httpx.post(f"{url}/admin/ping", headers=bearer(USER)).status_code == 200


def test_with_no_key_configured_everything_is_open(serve) -> None:
    url = serve()
    assert httpx.get(f"{url}/v1/models").status_code == 200
    assert httpx.post(f"{url}/v1/audio/speech", json={"input": "hi"}).status_code == 200


def test_a_missing_key_file_fails_at_start(tmp_path) -> None:
    with pytest.raises(OSError):
        create_app(Settings(api_keys_file=tmp_path / "absent"), FakeBackend())
