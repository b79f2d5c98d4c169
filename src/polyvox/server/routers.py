"""`add_routes`: a router's routes put into the app (or another router) as they were declared, where
FastAPI's `include_router` would have them built again for every app that includes them."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI


def add_routes(target: FastAPI | APIRouter, router: APIRouter) -> None:
    """Append `router`'s routes to `target`'s, in their order. Each route was built once, when its module
    declared it (its path with the router's prefix, its dependencies analysed, its fields' validators
    made); FastAPI's `include_router` (0.165) builds every route again for each app that includes it, on
    that app's first request, and walks the included router at every request after. polyvox's routers
    are complete as declared (no prefix, tags or dependencies are given where they are added), so the
    routes the app serves, their order and its OpenAPI document are those `include_router` gives
    (tests/server/test_routers.py); an app's first request costs a tenth of the CPU it did, and every
    later one a little less (`bench/app_start.py`, BENCHMARKS.md). What differs: `app.dependency_overrides`
    does not reach these routes (a route built once answers to its own router's; nothing in polyvox sets
    either)."""
    target.routes.extend(router.routes)  # an app's `routes` is its router's list itself
