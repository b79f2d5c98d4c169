"""The app takes its routers' routes as they were declared (`server/routers.py`) rather than through
FastAPI's `include_router`, which builds them again for every app: what a client meets is the same
either way. The app is built both ways here, FastAPI's own inclusion as the reference: the same routes
in the same order (path, methods and name of each; the order decides which route answers: an included
router is opened through FastAPI's own view of it, `effective_candidates`) and the same OpenAPI
document; and every route of every router is served, once."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI

from polyvox.backends.fake import FakeBackend
from polyvox.server import app as app_module
from polyvox.server import ui
from polyvox.server.app import create_app
from polyvox.settings import Settings


def route_table(app: FastAPI) -> list[tuple]:
    """Every route a request can meet, in the order the app tries them, nested routers opened."""
    table = []
    for route in app.routes:
        if hasattr(route, "effective_candidates"):  # a router FastAPI included (an _IncludedRouter)
            for candidate in route.effective_candidates():
                inner = getattr(candidate, "original_route", candidate)
                table.append(describe(inner))
        else:
            table.append(describe(route))
    return table


def describe(route) -> tuple:
    return (getattr(route, "path", None), sorted(getattr(route, "methods", None) or []), route.name)


@pytest.fixture
def built_both_ways(monkeypatch, tmp_path) -> tuple[FastAPI, FastAPI]:
    settings = Settings(voices_dir=tmp_path, cache_enabled=False)
    ours = create_app(settings, FakeBackend())

    def include(target: FastAPI | APIRouter, router: APIRouter) -> None:
        target.include_router(router)

    monkeypatch.setattr(app_module, "add_routes", include)
    monkeypatch.setattr(ui, "add_routes", include)
    return ours, create_app(settings, FakeBackend())


def test_the_routes_and_their_order_are_those_include_router_gives(built_both_ways) -> None:
    ours, included = built_both_ways
    assert route_table(ours) == route_table(included)
    assert len(route_table(ours)) > 40


def test_the_openapi_document_is_the_one_include_router_gives(built_both_ways) -> None:
    ours, included = built_both_ways
    assert ours.openapi() == included.openapi()


def test_the_app_serves_every_declared_route_once(built_both_ways) -> None:
    ours, _ = built_both_ways
    served = [describe(route) for route in ours.routes]
    assert len(served) == len(set(map(repr, served)))
    assert not any(hasattr(route, "effective_candidates") for route in ours.routes)  # nothing to rebuild
