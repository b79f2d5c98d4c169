"""What the server offers: `GET /v1/models` (OpenAI's list), `GET /v1/audio/models` (the same ids in the
shape Open WebUI asks a TTS server for) and which model ids a speech request may name. The voice lists
are in `voice_routes/voices.py`."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from polyvox.backends.base import Backend
from polyvox.server.deps import get_created, get_service
from polyvox.server.errors import APIError
from polyvox.server.protocol import ModelCard, ModelList, WebUIModel, WebUIModelList
from polyvox.server.speech.synthesis import SpeechService

router = APIRouter(tags=["catalog"])

# OpenAI's speech model names are accepted as aliases of the served engine, so clients work unchanged.
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


def served_model_ids(backend: Backend) -> list[str]:
    """The model ids a speech request may name: the engine's model, its family (e.g. `voxcpm2` for
    any VoxCPM2 checkpoint) and OpenAI's speech model names."""
    return list(dict.fromkeys((backend.info.model_id, backend.info.name, *OPENAI_MODEL_ALIASES)))


def check_model(model: str, backend: Backend, accept_any: bool) -> None:
    """404 `model_not_found` for a model id this server does not list, as OpenAI answers (unless
    `accept_any`: the `accept_any_model` setting)."""
    if not accept_any and model not in served_model_ids(backend):
        raise APIError(
            404,
            f"model {model!r} not found; GET /v1/models lists the models (accept_any_model accepts any)",
            param="model",
            code="model_not_found",
        )


def _models(service: SpeechService, created: int) -> list[ModelCard]:
    return [ModelCard(id=name, created=created) for name in served_model_ids(service.backend)]


@router.get("/v1/models", response_model=ModelList)
async def list_models(
    service: SpeechService = Depends(get_service), created: int = Depends(get_created)
) -> ModelList:
    return ModelList(data=_models(service, created))


@router.get("/v1/models/{model_id}", response_model=ModelCard)
async def get_model(
    model_id: str, service: SpeechService = Depends(get_service), created: int = Depends(get_created)
) -> ModelCard:
    for card in _models(service, created):
        if card.id == model_id:
            return card
    raise APIError(404, f"model {model_id!r} not found", param="model", code="model_not_found")


@router.get("/v1/audio/models", response_model=WebUIModelList)
async def list_audio_models(
    service: SpeechService = Depends(get_service), created: int = Depends(get_created)
) -> WebUIModelList:
    """Open WebUI lists a TTS server's models here (and falls back to tts-1 and tts-1-hd without it);
    each also says which `emotion`s it speaks (every id names the one engine served)."""
    emotions = list(service.backend.info.capabilities.emotions)
    return WebUIModelList(
        models=[WebUIModel(id=card.id, name=card.id, emotions=emotions) for card in _models(service, created)]
    )
