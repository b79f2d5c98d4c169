"""Every route the app mounts (found from the app itself, WebSocket routes and mounts too) × each method
it serves × each credential: no key, a wrong key, a named key of each scope (`speech`, `voices`,
`admin`), the settings' admin key and the settings' plain key. A caller whose key is missing or wrong
gets 401, a key without the route's scope 403, and a key with it reaches the route (neither, and never
a 5xx); the open routes (health, readiness, metrics, the API docs, the playground's page and assets)
answer everyone. `SCOPES` declares each route's scope: a route mounted without an entry there fails
the test, so a new route cannot be left unchecked. Then the path tricks that must not reach an admin
route without an admin key (`//admin/keys`, `/admin/../admin/keys`, `/ADMIN/keys`, a trailing slash,
percent-encoding, keys in the query string), sent as raw bytes so no client library tidies them first;
a path read as another (a doubled slash merged, percent-encoding decoded) still needs that path's
scope."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from helpers.raw_http import address
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

ADMIN, USER = "matrix-settings-admin", "matrix-settings-user"

OPEN, ANY, SPEECH, VOICES_READ, VOICES_WRITE, ADMIN_SCOPE = (
    "open",
    "any key",
    "speech",
    "voices (read)",
    "voices (write)",
    "admin",
)
# Who reaches a route of each scope; every other credential is refused (401 without a valid key).
REACHES = {
    OPEN: {"none", "wrong", "speech", "voices", "admin", "settings-admin", "settings-user"},
    ANY: {"speech", "voices", "admin", "settings-admin", "settings-user"},
    SPEECH: {"speech", "admin", "settings-admin", "settings-user"},
    VOICES_READ: {"voices", "admin", "settings-admin", "settings-user"},
    # the settings' plain key manages no voice: that takes an admin key (auth.needs_admin)
    VOICES_WRITE: {"voices", "admin", "settings-admin"},
    ADMIN_SCOPE: {"admin", "settings-admin"},
}
WS = "WEBSOCKET"

# Every mounted route's path → the scope of each method it serves ("WEBSOCKET" for a WebSocket route).
SCOPES: dict[str, dict[str, str]] = {
    "/health": {"GET": OPEN, "HEAD": OPEN},
    "/ready": {"GET": OPEN},
    "/metrics": {"GET": OPEN},
    "/openapi.json": {"GET": OPEN, "HEAD": OPEN},
    "/docs": {"GET": OPEN, "HEAD": OPEN},
    "/docs/oauth2-redirect": {"GET": OPEN, "HEAD": OPEN},
    "/redoc": {"GET": OPEN, "HEAD": OPEN},
    "/": {"GET": OPEN},
    "/ui": {"GET": OPEN},
    "/ui/assets": {"GET": OPEN},
    "/ui/config": {"GET": ANY},
    "/ui/voices": {"GET": VOICES_READ},
    "/v1/models": {"GET": ANY},
    "/v1/models/{model_id}": {"GET": ANY},
    "/v1/audio/models": {"GET": ANY},
    "/v1/usage": {"GET": ANY},
    "/v1/audio/speech": {"POST": SPEECH},
    "/v1/audio/speech/stream": {"POST": SPEECH},
    "/v1/audio/speech/ws": {WS: SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}": {"POST": SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}/stream": {"POST": SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}/with-timestamps": {"POST": SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}/stream/with-timestamps": {"POST": SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}/stream-input": {WS: SPEECH},
    "/elevenlabs/v1/text-to-speech/{voice_id}/multi-stream-input": {WS: SPEECH},
    "/elevenlabs/v1/voices": {"GET": SPEECH},
    "/v1/audio/voices": {"GET": VOICES_READ, "POST": VOICES_WRITE},
    "/v1/voices": {"GET": VOICES_READ},
    "/v1/audio/voices/{voice_id}": {"GET": VOICES_READ, "POST": VOICES_WRITE, "DELETE": VOICES_WRITE},
    "/v1/audio/voice_consents": {"GET": VOICES_READ, "POST": VOICES_WRITE},
    "/v1/audio/voice_consents/{consent_id}": {
        "GET": VOICES_READ,
        "POST": VOICES_WRITE,
        "DELETE": VOICES_WRITE,
    },
    "/admin/reload-voices": {"POST": ADMIN_SCOPE},
    "/admin/lexicon": {"GET": ADMIN_SCOPE, "POST": ADMIN_SCOPE, "DELETE": ADMIN_SCOPE},
    "/admin/lexicon/{term:path}": {"DELETE": ADMIN_SCOPE},
    "/admin/lexicon/reload": {"POST": ADMIN_SCOPE},
    "/admin/lora": {"GET": ADMIN_SCOPE, "POST": ADMIN_SCOPE},
    "/admin/lora/{name}": {"DELETE": ADMIN_SCOPE},
    "/admin/keys": {"GET": ADMIN_SCOPE, "POST": ADMIN_SCOPE},
    "/admin/keys/{key_id}": {"DELETE": ADMIN_SCOPE},
}
# What a path's parameters are filled with: ids nobody has, so no write changes anything.
PARAMETERS = {
    "{model_id}": "tts-1",
    "{voice_id}": "matrix-nobody",
    "{consent_id}": "matrix-nobody",
    "{term:path}": "matrix-nobody",
    "{name}": "matrix-nobody",
    "{key_id}": "matrix-nobody",
}
MOUNT_FILES = {"/ui/assets": "/ui/assets/js/main.js"}


def mounted(app) -> dict[str, set[str]]:
    """Every route the app serves: its path and its methods (WS for a WebSocket route, GET for a mount)."""
    routes: dict[str, set[str]] = {}
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, Mount):
            methods = {"GET"}
        else:
            methods = set(route.methods) if route.methods else {WS}
        routes.setdefault(route.path, set()).update(methods)
    return routes


def concrete(path: str) -> str:
    for parameter, value in PARAMETERS.items():
        path = path.replace(parameter, value)
    return MOUNT_FILES.get(path, path)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, dict[str, dict[str, str]], dict[str, set[str]]]]:
    voices = tmp_path_factory.mktemp("matrix-voices")  # its named keys stay its own
    app = create_app(Settings(admin_api_keys=[ADMIN], api_keys=[USER], voices_dir=voices), FakeBackend())
    with running_server(app) as url:
        credentials = {
            "none": {},
            "wrong": {"Authorization": "Bearer matrix-wrong-key"},
            "settings-admin": {"Authorization": f"Bearer {ADMIN}"},
            "settings-user": {"Authorization": f"Bearer {USER}"},
        }
        for scope in ("speech", "voices", "admin"):
            made = httpx.post(
                f"{url}/admin/keys",
                json={"name": f"matrix-{scope}", "scopes": [scope]},
                headers=credentials["settings-admin"],
            )
            assert made.status_code == 201, made.text
            credentials[scope] = {"Authorization": f"Bearer {made.json()['key']}"}
        yield url, credentials, mounted(app)


def test_every_mounted_route_has_a_declared_scope(server) -> None:
    _, _, routes = server
    assert {path: methods for path, methods in routes.items()} == {
        path: set(methods) for path, methods in SCOPES.items()
    }, "declare the scope of each new route (or method) in SCOPES"


def _websocket_status(url: str, path: str, headers: dict[str, str]) -> int:
    try:
        with connect(
            url.replace("http://", "ws://") + path, additional_headers=headers, open_timeout=30
        ) as ws:
            if path.startswith("/elevenlabs/"):
                return _elevenlabs_socket_status(ws)
            ws.send(json.dumps({"type": "config"}))
            assert json.loads(ws.recv(timeout=30))["type"] == "ready"
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def _elevenlabs_socket_status(ws) -> int:
    """An ElevenLabs socket may take its key in its first message (none sent here): a handshake without
    one is accepted and the first message refused with the status the handshake would have had."""
    ws.send(json.dumps({"text": " ", "context_id": "matrix"}))
    ws.send(json.dumps({"text": "Hello.", "flush": True, "context_id": "matrix"}))
    answer = json.loads(ws.recv(timeout=30))
    if answer.get("code") in (401, 403):
        return answer["code"]
    assert "audio" in answer or answer.get("error") == "voice_not_found", answer
    return 101


def _status(url: str, method: str, path: str, headers: dict[str, str]) -> int:
    if method == WS:
        return _websocket_status(url, path, headers)
    return httpx.request(method, url + path, headers=headers, timeout=30).status_code


CASES = [(path, method, scope) for path, methods in SCOPES.items() for method, scope in methods.items()]


@pytest.mark.parametrize(("path", "method", "scope"), CASES, ids=[f"{m} {p}" for p, m, _ in CASES])
def test_each_credential_gets_what_the_routes_scope_allows(
    server, path: str, method: str, scope: str
) -> None:
    url, credentials, _ = server
    answers = {who: _status(url, method, concrete(path), headers) for who, headers in credentials.items()}
    expected = {}
    for who, status in answers.items():
        if who in REACHES[scope]:
            expected[who] = status if status not in (401, 403) and status < 500 else "reached"
        else:
            expected[who] = 401 if who in ("none", "wrong") else 403
    assert answers == expected, f"{method} {path} ({scope}): {answers}"


def test_a_method_a_path_does_not_serve_is_401_before_405_without_a_key(server) -> None:
    url, credentials, _ = server
    for path, methods in SCOPES.items():
        if OPEN in methods.values():
            continue
        for who in ("none", "wrong"):
            assert _status(url, "PATCH", concrete(path), credentials[who]) == 401, (path, who)


def raw_status(url: str, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A GET of `target` exactly as written (no client normalises it); the status and the body."""
    lines = [f"GET {target} HTTP/1.1", "Host: polyvox", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection(address(url), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


ADMIN_TRICKS = [
    "//admin/keys",
    "/admin//keys",
    "/admin/../admin/keys",
    "/v1/../admin/keys",
    "/./admin/keys",
    "/ADMIN/keys",
    "/Admin/Keys",
    "/admin/keys/",
    "/%61dmin/keys",
    "/admin%2Fkeys",
    "/%2Fadmin/keys",
    "/admin/keys%00",
    f"/admin/keys?api_key={ADMIN}",
    f"/admin/keys?key={ADMIN}",
    f"/admin/keys?api-key={ADMIN}&access_token={ADMIN}",
]


@pytest.mark.parametrize("target", ADMIN_TRICKS)
def test_path_tricks_do_not_reach_an_admin_route_without_an_admin_key(server, target: str) -> None:
    url, credentials, _ = server
    for who in ("none", "wrong", "speech", "voices", "settings-user"):
        status, body = raw_status(url, target, credentials[who])
        assert status in (400, 401, 403, 404, 405), (target, who, status, body)
        assert b'"data"' not in body, (target, who, body)  # never the key list


@pytest.mark.parametrize(
    ("target", "who"),
    [
        ("/v1//audio/voices", "speech"),  # the voice list without the voices scope
        ("/v1/audio//voices/alloy", "speech"),
        ("/%761/audio/voices", "speech"),
        ("/ui//voices", "speech"),
        ("/v1/audio/voices/", "speech"),
        (f"/v1/audio/voices?api_key={USER}", "none"),
        (f"/v1/models?key={USER}", "none"),
    ],
)
def test_path_tricks_do_not_widen_a_keys_scope(server, target: str, who: str) -> None:
    url, credentials, _ = server
    status, body = raw_status(url, target, credentials[who])
    assert status in (401, 403, 404, 405), (target, who, status, body)
