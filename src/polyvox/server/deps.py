"""FastAPI dependencies: the per-app objects routes need, taken from `app.state`."""

from __future__ import annotations

import secrets

from fastapi import Request

from polyvox.engines.base import Engine
from polyvox.server.errors import APIError
from polyvox.server.metrics import Metrics
from polyvox.server.synthesis import SpeechService
from polyvox.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_service(request: Request) -> SpeechService:
    return request.app.state.service


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


def require_api_key(request: Request) -> None:
    """401 unless the request carries the configured key as a Bearer token (no key configured: open)."""
    expected = request.app.state.settings.api_key
    if not expected:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected.encode()):
        raise APIError(
            401,
            "missing or incorrect API key: send `Authorization: Bearer <key>`",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
