"""Which model ids a speech request may name: the back end's model, its family and OpenAI's speech model
names (the catalog routes list them; every speech path checks a request's `model` against them)."""

from __future__ import annotations

from polyvox.backends.base import Backend
from polyvox.server.errors import APIError

# OpenAI's speech model names are accepted as aliases of the served back end, so clients work unchanged.
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


def served_model_ids(backend: Backend) -> list[str]:
    """The model ids a speech request may name: the back end's model, its family (e.g. `voxcpm2` for
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
