"""FastAPI dependencies: the per-app objects routes take (`Depends(get_...)`), each from the `AppState`
`create_app` built. The one place a route reaches the app's state; nothing below the routes reads it.
Each takes the connection, so HTTP and WebSocket routes alike can use them. (API keys are checked
before routing, by `auth.AuthMiddleware`.)"""

from __future__ import annotations

import anyio
from starlette.requests import HTTPConnection

from polyvox.backends.base import Backend
from polyvox.server.app_state import AppState, app_state
from polyvox.server.metrics import Metrics
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.authorization import Authorizer
from polyvox.server.tenancy.service import Tenancy
from polyvox.settings import Settings
from polyvox.text.lexicon import Lexicon
from polyvox.voices.registry import VoiceRegistry


def get_state(connection: HTTPConnection) -> AppState:
    return app_state(connection.app)


def get_settings(connection: HTTPConnection) -> Settings:
    return app_state(connection.app).settings


def get_backend(connection: HTTPConnection) -> Backend:
    return app_state(connection.app).backend


def get_service(connection: HTTPConnection) -> SpeechService:
    return app_state(connection.app).service


def get_metrics(connection: HTTPConnection) -> Metrics:
    return app_state(connection.app).metrics


def get_created(connection: HTTPConnection) -> int:
    """When the app was made (Unix time): `/v1/models`' `created`."""
    return app_state(connection.app).created


def get_tenancy(connection: HTTPConnection) -> Tenancy:
    return app_state(connection.app).tenancy


def get_authorizer(connection: HTTPConnection) -> Authorizer:
    return app_state(connection.app).authorizer


def get_lexicon(connection: HTTPConnection) -> Lexicon | None:
    return app_state(connection.app).lexicon


def get_registry(connection: HTTPConnection) -> VoiceRegistry:
    return app_state(connection.app).voices


async def get_fresh_registry(connection: HTTPConnection) -> VoiceRegistry:
    """The registry, first brought up to date when another server sharing the voices directory changed
    `voices.json` (otherwise one stat, off the event loop)."""
    registry = app_state(connection.app).voices
    await anyio.to_thread.run_sync(registry.refresh)
    return registry
