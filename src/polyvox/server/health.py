"""Liveness (`GET|HEAD /health`), readiness (`GET /ready`, 503 until the back end is warm, or while the
key store cannot vouch for the keys of a server that requires them; "degraded" while some of its
data-parallel ranks are down or `voices.json` cannot be read) and Prometheus metrics (`GET /metrics`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST

from polyvox.backends.base import Backend
from polyvox.runtime.startup import STAGES
from polyvox.server.app_state import AppState
from polyvox.server.deps import get_backend, get_metrics, get_state
from polyvox.server.errors import APIError, error_response, keys_unavailable
from polyvox.server.metrics import Metrics
from polyvox.server.tenancy.key_table import FRESH_S
from polyvox.voices.freeze_at_start import FREEZE_STAGE

router = APIRouter(tags=["health"])


@router.get("/health")
@router.head("/health", include_in_schema=False)
async def health() -> dict[str, str]:
    """The process is up and answering."""
    return {"status": "ok"}


@router.get("/ready", response_model=None)
async def ready(
    state: AppState = Depends(get_state), backend: Backend = Depends(get_backend)
) -> dict[str, Any] | Response:
    """Ready to synthesise: the engine has started and warmed up, and the server is not draining. With
    data-parallel engine ranks: 200 "ready" when every rank is up, 200 "degraded" naming the ranks
    down (restarting) when some are, 503 when none is. 200 "degraded" with `voices_problem` while
    `voices.json` cannot be read: the voices read before it broke keep serving, so the server stays in
    service (a typo in a file several servers share must not take them all out), and says why here.

    A 503 here is returned, not raised: it answers a probe, so `polyvox_errors_total` leaves it out."""
    if (refusal := _not_ready(state, backend)) is not None:
        return error_response(refusal)
    keys = state.tenancy.keys
    if keys.required:
        await keys.refresh(FRESH_S)
        if keys.problem is not None:  # every request without a settings key is refused meanwhile
            return error_response(keys_unavailable(keys.problem))
    answer: dict[str, Any] = {"status": "ready", "engine": backend.info.name, "model": backend.info.model_id}
    if _cold(state):  # idle_unload_s / load_on_demand: takes requests, the next one loads the back end
        return {**answer, "status": "cold"}
    down = [number for number, rank in enumerate(backend.engine_ranks()) if not rank.up]
    if down:  # some data-parallel ranks are restarting; the others serve
        answer.update(status="degraded", ranks_down=down)
    if (problem := state.voices.problem) is not None:
        answer.update(status="degraded", voices_problem=problem)
    return answer


def _not_ready(state: AppState, backend: Backend) -> APIError | None:
    """Why the server cannot take speech requests now (a 503), or None when it can."""
    if (refusal := not_started(state, backend)) is not None:
        return refusal
    if state.peers_starting is not None and (starting := state.peers_starting()):
        # several API processes on one port: a client asking here may be dealt to any of them next
        named = ", ".join(map(str, starting))
        return APIError(
            503,
            f"the server is still starting: API server process {named} is loading its engine",
            code="engine_not_ready",
            headers={"Retry-After": "5"},
        )
    return None


def not_started(state: AppState, backend: Backend) -> APIError | None:
    """Why this process cannot take speech requests now (a 503), or None when it can."""
    if state.lifecycle.draining:
        return APIError(503, "the server is shutting down", code="shutting_down")
    if not backend.ready and not _cold(state):
        if failure := state.backend_failure:
            return APIError(503, f"the engine failed to start: {failure}", code="engine_failed")
        if state.supervisor.restarting:
            return APIError(
                503,
                "the engine is restarting after a failure",
                code="engine_restarting",
                headers={"Retry-After": "5"},
            )
        # an engine process's stage (it said which), else one running here (an engine in this process)
        current = next((rank.stage for rank in backend.engine_ranks() if rank.stage), None) or STAGES.current
        starting = f"the engine is still starting: {current}" if current else "the engine is still starting"
        return APIError(503, starting, code="engine_not_ready", headers={"Retry-After": "5"})
    if state.freezing_voices:  # freeze_voices_at_start: the back end serves, not yet ready
        return APIError(
            503,
            f"the server is still starting: {STAGES.current or FREEZE_STAGE}",
            code="engine_not_ready",
            headers={"Retry-After": "5"},
        )
    return None


def _cold(state: AppState) -> bool:
    """Whether the back end is unloaded on purpose (idle_unload_s, load_on_demand), not failing."""
    return state.cold_start is not None and state.cold_start.cold


@router.get("/metrics")
async def metrics(m: Metrics = Depends(get_metrics)) -> Response:
    """Prometheus text; with several API processes on one port, counts summed over all of them."""
    return Response(m.exposition(), media_type=CONTENT_TYPE_LATEST)
