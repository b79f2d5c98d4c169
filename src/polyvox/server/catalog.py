"""What the server offers: `GET /v1/models` (OpenAI's list) and `GET /v1/audio/models` (the same ids in
the shape Open WebUI asks a TTS server for). Which ids a speech request may name is `served_models.py`;
the voice lists are in `voice_routes/voices.py`."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from polyvox.server.deps import get_created, get_service
from polyvox.server.errors import APIError
from polyvox.server.protocol import ModelCard, ModelList, WebUIModel, WebUIModelList
from polyvox.server.served_models import served_model_ids
from polyvox.server.speech.synthesis import SpeechService

router = APIRouter(tags=["catalog"])


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
