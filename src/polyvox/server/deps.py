"""FastAPI dependencies: the per-app objects routes need, taken from `app.state`. (API keys are checked
before routing, by `auth.AuthMiddleware`.)"""

from __future__ import annotations

from fastapi import Request

from polyvox.backends.base import Backend
from polyvox.server.metrics import Metrics
from polyvox.server.speech.synthesis import SpeechService


def get_backend(request: Request) -> Backend:
    return request.app.state.backend


def get_service(request: Request) -> SpeechService:
    return request.app.state.service


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics
