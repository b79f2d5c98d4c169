"""Every ElevenLabs-shaped route in one router, for `create_app` to mount."""

from __future__ import annotations

from fastapi import APIRouter

from polyvox.server.elevenlabs import http_routes, socket_route, voices

router = APIRouter()
router.include_router(http_routes.router)
router.include_router(voices.router)
router.include_router(socket_route.router)
