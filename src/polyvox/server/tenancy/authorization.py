"""Who a request comes from and whether it may use its path (`Authorizer`): bearer keys from settings,
the environment or a key file, and admin keys for `/admin/*` and voice management (POST/PUT/PATCH/DELETE
under `/v1/audio/voices`, `/v1/voices` and `/v1/audio/voice_consents`); and named keys
(`server.tenancy`), each with its scopes (`speech`: the speech routes and the WebSocket; `voices`: the
voice and consent routes; `admin`: everything). `server/auth.py`'s middleware asks it about every HTTP
request and WebSocket handshake before routing.

Every route, including ones added later, is guarded unless it is in `OPEN_PATHS` (health, readiness,
metrics, the API docs, the playground page), and a caller without a key learns nothing of the routes:
401 comes before any 404, 405 or trailing-slash redirect. `public_model_list` leaves the model and voice
lists (`PUBLIC_LIST_PATHS`) readable without a key. A WebSocket handshake may offer its key as a
subprotocol instead (`websocket_key`), as browsers can. ElevenLabs' clients' `xi-api-key` is read on the
`/elevenlabs` routes as the same key (needing the `speech` scope); its text-to-speech sockets may bring
it in their first message instead (`KEY_TO_COME`, then `Authorizer.authorize_key`).
Whether the server is open (no key needed) is decided as it starts (`KeyTable.at_start`) and never
turns back on: a server that requires keys refuses every request without a settings key with 503
`key_store_unavailable` while its key store cannot vouch for the named keys (unreadable, or emptied).
Answers are OpenAI-shaped: 401 for a missing or unknown key, 403 for a valid key on an admin route
that is not an admin key.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Iterable

from starlette.requests import HTTPConnection

from polyvox.server.errors import APIError, keys_unavailable
from polyvox.server.key_ring import KeyRing, key_digest
from polyvox.server.tenancy.caller import ANONYMOUS, KEY_TO_COME, PUBLIC, SETTINGS_KEY_NAME, Caller, remember
from polyvox.server.tenancy.key_table import FRESH_S, KeyTable
from polyvox.server.tenancy.keys import Scope as KeyScope

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset(
    {"/health", "/ready", "/metrics", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    | {"/", "/ui"}  # the playground's static page; its API calls carry the user's key
)
OPEN_PREFIXES = ("/ui/assets/",)  # the playground's scripts and styles
ADMIN_PREFIXES = ("/admin/",)
VOICE_ADMIN_PREFIXES = ("/v1/audio/voices", "/v1/voices", "/v1/audio/voice_consents")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The model and voice lists `public_model_list` opens (and one model's card); never a voice's details.
PUBLIC_LIST_PATHS = frozenset({"/v1/models", "/v1/audio/models", "/v1/audio/voices", "/v1/voices"})
MODEL_CARD_PREFIX = "/v1/models/"
SPEECH_PREFIX = "/v1/audio/speech"
WEBSOCKET_KEY_PREFIX = "polyvox.key."
# ElevenLabs' clients send the key as `xi-api-key` (a header, or the first message of a text-to-speech
# socket): read on the ElevenLabs-shaped routes as the same key `Authorization: Bearer` carries.
ELEVENLABS_PREFIX = "/elevenlabs/"
XI_API_KEY = "xi-api-key"
KEY_IN_FIRST_MESSAGE = ("/stream-input", "/multi-stream-input")


def needs_admin(method: str, path: str) -> bool:
    if path.startswith(ADMIN_PREFIXES) or path == "/admin":
        return True
    return method not in READ_METHODS and path.startswith(VOICE_ADMIN_PREFIXES)


def _bearer(request: HTTPConnection) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        return token
    if request.url.path.startswith(ELEVENLABS_PREFIX) and (xi := request.headers.get(XI_API_KEY, "").strip()):
        return xi
    return websocket_key(request.scope.get("subprotocols", ()))


def _key_may_follow(request: HTTPConnection) -> bool:
    """An ElevenLabs text-to-speech socket, whose key may come in its first message instead."""
    path = request.url.path
    return (
        request.scope["type"] == "websocket"
        and path.startswith(ELEVENLABS_PREFIX)
        and path.endswith(KEY_IN_FIRST_MESSAGE)
    )


def websocket_key(subprotocols: Iterable[str]) -> str | None:
    """The key a browser's WebSocket offers as the subprotocol `polyvox.key.<base64url of the key>`:
    browsers cannot set headers on a WebSocket handshake, and a query string would end up in logs."""
    for offered in subprotocols:
        if offered.startswith(WEBSOCKET_KEY_PREFIX):
            encoded = offered.removeprefix(WEBSOCKET_KEY_PREFIX)
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode() or None
            except (binascii.Error, UnicodeDecodeError):
                return None
    return None


def is_public_list(method: str, path: str) -> bool:
    """A read of the model or voice lists, which `public_model_list` leaves open."""
    if method not in ("GET", "HEAD"):
        return False
    model_id = path.removeprefix(MODEL_CARD_PREFIX) if path.startswith(MODEL_CARD_PREFIX) else None
    return path in PUBLIC_LIST_PATHS or bool(model_id and "/" not in model_id)


def required_scope(method: str, path: str) -> KeyScope | None:
    """The scope a named key needs for this path (None: any valid key)."""
    if path.startswith(ADMIN_PREFIXES) or path == "/admin":
        return "admin"
    if path.startswith(VOICE_ADMIN_PREFIXES):
        return "voices"
    if path.startswith((SPEECH_PREFIX, ELEVENLABS_PREFIX)):
        return "speech"
    return None


def _refused() -> APIError:
    return APIError(
        401,
        "missing or incorrect API key: send `Authorization: Bearer <key>`",
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )


class Authorizer:
    """The settings' keys (`keyring`: checked first, no store is read for them), then the named keys of
    `keys`; `public_model_list` as the settings say. Built once, by `create_app`."""

    def __init__(self, keyring: KeyRing, keys: KeyTable, public_model_list: bool):
        self.keyring = keyring
        self.keys = keys
        self.public_model_list = public_model_list

    async def authorize(self, request: HTTPConnection) -> Caller:
        """Who the request (or WebSocket handshake) comes from; APIError 401 / 403 / 503 unless it may use
        this path."""
        path = request.url.path
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return ANONYMOUS
        return await self._authorize(request, _bearer(request), defer=_key_may_follow(request))

    async def authorize_key(self, connection: HTTPConnection, key: str | None) -> Caller:
        """For a socket whose handshake brought no key (`KEY_TO_COME`): check the key its first message
        brings, as a handshake's would be, and leave the caller in its scope; APIError 401 / 403 / 503."""
        token = key.strip() or None if key is not None else None
        caller = await self._authorize(connection, token, defer=False)
        remember(connection.scope, caller)
        return caller

    async def _authorize(self, request: HTTPConnection, token: str | None, *, defer: bool) -> Caller:
        path = request.url.path
        method = request.scope.get("method", "GET")  # a WebSocket handshake has none
        ring, table = self.keyring, self.keys
        digest = key_digest(token) if token is not None else None
        if digest is not None and ring.is_valid(digest):
            if needs_admin(method, path) and ring.admin_keys and not ring.is_admin(digest):
                raise APIError(403, f"{method} {path} needs an admin API key", code="admin_key_required")
            return Caller(SETTINGS_KEY_NAME, admin=ring.is_admin(digest) or not ring.admin_keys)
        await table.refresh(FRESH_S)  # on an open server too: a key made with `polyvox keys create` closes it
        if not table.required:
            return ANONYMOUS
        named = await table.lookup(digest.hex()) if digest is not None else None
        if named is None and self.public_model_list and is_public_list(method, path):
            return PUBLIC
        if token is None and defer:
            return KEY_TO_COME
        if table.problem is not None:  # the store cannot vouch for any named key now: fail closed
            raise keys_unavailable(table.problem)
        if named is None:
            raise _refused()
        scope = required_scope(method, path)
        if scope is not None and not named.allows(scope):
            code = "admin_key_required" if scope == "admin" else "insufficient_scope"
            raise APIError(403, f"{method} {path} needs a key with the {scope!r} scope", code=code)
        return Caller.named(named)
