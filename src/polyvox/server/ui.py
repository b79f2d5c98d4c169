"""The web playground: the page at `/` and `/ui`, its static assets under `/ui/assets/`, and what the
page needs to know about this server that no OpenAI route says: `GET /ui/config` (limits and what the
back end can do) and `GET /ui/voices` (every voice with its details, in one answer).

The page and its assets are static and open (`OPEN_PATHS`, `OPEN_PREFIXES`: tenancy/authorization.py); every
API call the page makes carries the key its user enters, so `/ui/config` and `/ui/voices` need a key like
any API route, and the scopes of the routes whose answers they repeat: `/ui/voices` shows what
`GET /v1/audio/voices/{id}` does, so a named key needs the `voices` scope for it. The voice lists
(`GET /v1/audio/voices`, `/v1/voices`) stay names only: `public_model_list` opens them without a key,
and a voice's details (its transcript) are not for everyone."""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from starlette.staticfiles import StaticFiles

from polyvox.server.deps import get_service
from polyvox.server.errors import APIError
from polyvox.server.protocol import SpeechRequest
from polyvox.server.routers import add_routes
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.caller import caller_of
from polyvox.server.tenancy.ownership import visible_voices
from polyvox.server.voice_routes.voices import get_fresh_registry
from polyvox.voices.detail import VoiceDetail
from polyvox.voices.registry import VoiceRegistry

router = APIRouter(tags=["playground"])

PAGE = files("polyvox") / "web" / "index.html"
ASSETS_PATH = "/ui/assets"


class PlaygroundConfig(BaseModel):
    """The limits and engine facts the playground shapes its controls by."""

    engine: str = Field(description="The back end's name: voxcpm2, embedded, ...")  # public JSON key
    model: str = Field(description="The engine's model id (also listed by GET /v1/models).")
    native_sample_rate: int
    # `BackendInfo.capabilities.cloning`: the playground shows its cloning, voice design and
    # `cfg_value` / `inference_timesteps` controls only for a back end that clones (VoxCPM2).
    can_clone: bool
    languages: list[str]
    max_input_chars: int
    voice_min_seconds: float
    voice_max_seconds: float
    max_upload_bytes: int
    cfg_value: float = Field(description="The server's default `cfg_value`.")
    inference_timesteps: int = Field(description="The server's default `inference_timesteps`.")
    instructions_mode: str = Field(description="What `instructions` do: design, or ignore.")
    instructions_mode_by_voice: dict[str, str] = Field(description="Per-voice exceptions to it.")
    default_sample_rate: int | str = Field(description="Rate of formats other than pcm when none is asked.")
    emotions: list[str] = Field(description="The `emotion`s the engine speaks.")


class PlaygroundVoices(BaseModel):
    """Every voice as `GET /v1/audio/voices/{id}` shows it, and the voice a request without one gets."""

    object: Literal["list"] = "list"
    data: list[VoiceDetail]
    default: str


def _page() -> HTMLResponse:
    return HTMLResponse(PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-cache"})


@router.get("/", include_in_schema=False)
async def page_at_root() -> HTMLResponse:
    return _page()


@router.get("/ui", include_in_schema=False)
async def page() -> HTMLResponse:
    return _page()


@router.get("/ui/config", response_model=PlaygroundConfig)
async def playground_config(service: SpeechService = Depends(get_service)) -> PlaygroundConfig:
    settings = service.settings
    info = service.backend.info
    return PlaygroundConfig(
        engine=info.name,
        model=info.model_id,
        native_sample_rate=info.sample_rate,
        can_clone=info.capabilities.cloning,
        languages=list(info.languages),
        max_input_chars=settings.max_input_chars,
        voice_min_seconds=settings.voice_min_seconds,
        voice_max_seconds=settings.voice_max_seconds,
        max_upload_bytes=settings.max_upload_bytes,
        cfg_value=settings.cfg_value,
        inference_timesteps=settings.inference_timesteps,
        instructions_mode=settings.instructions_mode,
        instructions_mode_by_voice=dict(settings.instructions_mode_by_voice),
        default_sample_rate=settings.default_sample_rate,
        emotions=list(info.capabilities.emotions),
    )


def voices_scope(request: Request) -> None:
    """403 for a named key without the `voices` scope, as the voice routes answer it (`auth`)."""
    key = caller_of(request).key
    if key is not None and not key.allows("voices"):
        path = request.url.path
        raise APIError(403, f"GET {path} needs a key with the 'voices' scope", code="insufficient_scope")


@router.get("/ui/voices", response_model=PlaygroundVoices, dependencies=[Depends(voices_scope)])
async def playground_voices(
    request: Request,
    service: SpeechService = Depends(get_service),
    registry: VoiceRegistry = Depends(get_fresh_registry),
) -> PlaygroundVoices:
    default = SpeechRequest.model_fields["voice"].default
    infos = registry.infos(service.backend)
    shown = visible_voices(request, registry, [info.id for info in infos])  # not other keys' private ones
    return PlaygroundVoices(data=[info for info in infos if info.id in shown], default=default)


def install(app: FastAPI) -> None:
    """Serve the playground: its routes, and its assets as static files."""
    add_routes(app, router)
    app.mount(ASSETS_PATH, StaticFiles(packages=[("polyvox", "web")]), name="ui-assets")
