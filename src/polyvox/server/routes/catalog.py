"""What the server offers: `GET /v1/models` (OpenAI's list). The voice lists are in `routes/voices.py`."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from polyvox.server.deps import get_service
from polyvox.server.errors import APIError
from polyvox.server.protocol import ModelCard, ModelList
from polyvox.server.synthesis import SpeechService

router = APIRouter(tags=["catalog"])

# OpenAI's speech model names are accepted as aliases of the served engine, so clients work unchanged.
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


def _models(request: Request, service: SpeechService) -> list[ModelCard]:
    created = request.app.state.created
    names = dict.fromkeys((service.engine.info.model_id, *OPENAI_MODEL_ALIASES))
    return [ModelCard(id=name, created=created) for name in names]


@router.get("/v1/models", response_model=ModelList)
async def list_models(request: Request, service: SpeechService = Depends(get_service)) -> ModelList:
    return ModelList(data=_models(request, service))


@router.get("/v1/models/{model_id}", response_model=ModelCard)
async def get_model(
    model_id: str, request: Request, service: SpeechService = Depends(get_service)
) -> ModelCard:
    for card in _models(request, service):
        if card.id == model_id:
            return card
    raise APIError(404, f"model {model_id!r} not found", param="model", code="model_not_found")
