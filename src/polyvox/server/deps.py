"""FastAPI dependencies: the per-app objects routes need, taken from the app's `AppState`. (API keys are
checked before routing, by `auth.AuthMiddleware`.)"""

from __future__ import annotations

from fastapi import Request

from polyvox.backends.base import Backend
from polyvox.server.app_state import AppState, app_state
from polyvox.server.metrics import Metrics
from polyvox.server.speech.synthesis import SpeechService


def get_state(request: Request) -> AppState:
    return app_state(request.app)


def get_backend(request: Request) -> Backend:
    return app_state(request.app).backend


def get_service(request: Request) -> SpeechService:
    return app_state(request.app).service


def get_metrics(request: Request) -> Metrics:
    return app_state(request.app).metrics
