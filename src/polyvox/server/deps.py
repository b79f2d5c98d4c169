"""FastAPI dependencies: the per-app objects routes take (`Depends(get_...)`), each from the `AppState`
`create_app` built. The one place a route reaches the app's state; nothing below the routes reads it.
(API keys are checked before routing, by `auth.AuthMiddleware`.)"""

from __future__ import annotations

import anyio
from fastapi import Request

from polyvox.backends.base import Backend
from polyvox.server.app_state import AppState, app_state
from polyvox.server.metrics import Metrics
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.service import Tenancy
from polyvox.settings import Settings
from polyvox.text.lexicon import Lexicon
from polyvox.voices.registry import VoiceRegistry


def get_state(request: Request) -> AppState:
    return app_state(request.app)


def get_settings(request: Request) -> Settings:
    return app_state(request.app).settings


def get_backend(request: Request) -> Backend:
    return app_state(request.app).backend


def get_service(request: Request) -> SpeechService:
    return app_state(request.app).service


def get_metrics(request: Request) -> Metrics:
    return app_state(request.app).metrics


def get_created(request: Request) -> int:
    """When the app was made (Unix time): `/v1/models`' `created`."""
    return app_state(request.app).created


def get_tenancy(request: Request) -> Tenancy:
    return app_state(request.app).tenancy


def get_lexicon(request: Request) -> Lexicon | None:
    return app_state(request.app).lexicon


def get_registry(request: Request) -> VoiceRegistry:
    return app_state(request.app).voices


async def get_fresh_registry(request: Request) -> VoiceRegistry:
    """The registry, first brought up to date when another server sharing the voices directory changed
    `voices.json` (otherwise one stat, off the event loop)."""
    registry = app_state(request.app).voices
    await anyio.to_thread.run_sync(registry.refresh)
    return registry
