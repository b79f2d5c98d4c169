"""With API keys on, a caller without a valid key gets 401 before anything else: no 404 for an unknown
path, no 405 for a wrong method, no redirect for a trailing slash, no WebSocket upgrade. Only a caller
with a key learns which paths exist."""

from __future__ import annotations

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

KEY = "sesame"
# (method, path, what a caller with a key gets): each is a routing answer, not a route's own.
PROBES = (
    ("GET", "/v1/no-such-route", 404),
    ("POST", "/admin/nothing-here", 404),
    ("DELETE", "/v1/models", 405),
    ("GET", "/v1/audio/speech", 405),
    ("PUT", "/v1/audio/voices", 405),
    ("GET", "/v1/models/", 307),
    ("POST", "/v1/audio/speech/", 307),
)


@pytest.fixture(scope="module")
def url():
    with running_server(create_app(Settings(api_keys=[KEY]), FakeBackend())) as base:
        yield base


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no key", "wrong key"])
def test_unknown_paths_wrong_methods_and_redirects_answer_401_without_a_key(url, headers) -> None:
    for method, path, _ in PROBES:
        response = httpx.request(method, f"{url}{path}", headers=headers, follow_redirects=False)
        assert response.status_code == 401, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "invalid_api_key"
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert "location" not in response.headers


def test_with_a_key_the_same_requests_reach_routing(url) -> None:
    """The probes above are what they claim: a key holder gets the 404, 405 and 307 that routing gives."""
    for method, path, status in PROBES:
        response = httpx.request(
            method, f"{url}{path}", headers={"Authorization": f"Bearer {KEY}"}, follow_redirects=False
        )
        assert response.status_code == status, (method, path)


def test_a_websocket_to_an_unknown_path_is_refused_401_without_a_key(url) -> None:
    ws = url.replace("http://", "ws://")
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{ws}/v1/no-such-socket")
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as unrouted:
        connect(f"{ws}/v1/no-such-socket", additional_headers={"Authorization": f"Bearer {KEY}"})
    assert unrouted.value.response.status_code != 401


def test_the_open_paths_stay_open_and_refusals_are_counted(url) -> None:
    assert httpx.get(f"{url}/health").status_code == 200
    httpx.get(f"{url}/v1/no-such-route")
    metrics = httpx.get(f"{url}/metrics").text
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith("polyvox_errors_total") and 'type="invalid_api_key"' in line
    ]
    assert counted and float(counted[0].split()[-1]) >= 1
