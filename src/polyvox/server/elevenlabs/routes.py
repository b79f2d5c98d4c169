"""Every ElevenLabs-shaped route in one router, for `create_app` to mount."""

from __future__ import annotations

from fastapi import APIRouter

from polyvox.server.elevenlabs import http_routes, socket_route, voices
from polyvox.server.routers import add_routes

router = APIRouter()
add_routes(router, http_routes.router)
add_routes(router, voices.router)
add_routes(router, socket_route.router)
