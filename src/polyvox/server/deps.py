"""FastAPI dependencies: the per-app objects routes need, taken from `app.state`."""

from __future__ import annotations

from fastapi import Request

from polyvox.engines.base import Engine
from polyvox.server.auth import authorize as require_api_key  # noqa: F401  (kept for routers)
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
