"""The application factory: `create_app(settings, engine)` wires the engine, admission control,
metrics, error translation and routers into one FastAPI app whose lifespan starts and stops the engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from fastapi import FastAPI

from polyvox import __version__
from polyvox.backends.base import Backend
from polyvox.cache import describe_cache
from polyvox.server import catalog, ui
from polyvox.server.admin import lexicon, lora
from polyvox.server.auth import AuthMiddleware, KeyRing
from polyvox.server.batching_metrics import BatchingStatsCollector
from polyvox.server.body_deadline import BodyDeadlineMiddleware
from polyvox.server.errors import install_error_handlers
from polyvox.server.lifecycle import fresh_reads, health, state_url
from polyvox.server.lifecycle.draining import Lifecycle
from polyvox.server.lifecycle.supervisor import BackendSupervisor
from polyvox.server.metrics import Metrics, MetricsMiddleware
from polyvox.server.request_id import RequestIdMiddleware
from polyvox.server.speech import route as speech_route
from polyvox.server.speech.caching import open_store
from polyvox.server.speech.streaming import quiet_cut_streams
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.voice_routes import consents, voices
from polyvox.server.websocket import route as websocket_route
from polyvox.settings import Settings
from polyvox.startup import stage
from polyvox.voices import directory_watch
from polyvox.voices.freeze_at_start import freeze_builtin_voices, wants_freeze_at_start
from polyvox.voices.metrics import VoiceCollector
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


async def _start_backend(app: FastAPI, backend: Backend) -> None:
    started = time.perf_counter()
    try:
        with stage(f"start the {backend.info.name} engine"):
            await backend.start()
    except Exception as exc:
        app.state.backend_failure = f"{type(exc).__name__}: {exc}"
        # An expected failure (memory, a missing kernel...): one line; the traceback at debug level.
        log.error(
            "engine %s failed to start: %s",
            backend.info.name,
            app.state.backend_failure,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        return
    app.state.supervisor.served = True
    log.info("engine %s ready in %.1f s", backend.info.name, time.perf_counter() - started)
    if wants_freeze_at_start(app.state.settings.freeze_voices_at_start, backend):
        app.state.freezing_voices = True  # set before any await: /ready never sees 200 in between
        try:
            await freeze_builtin_voices(app.state.voices, backend)
        finally:
            app.state.freezing_voices = False


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the engine in the background (so /health and /ready answer while it warms), restart it if
    it stops serving, stop it at exit."""
    backend: Backend = app.state.backend
    starting = asyncio.create_task(_start_backend(app, backend))
    supervising = asyncio.create_task(app.state.supervisor.run())
    with stage("load the registered voices"):
        await voices.load_voices(app)
    await state_url.start(app)  # voices and the lexicon in step with the other replicas (Redis)
    directory_watch.start(app)  # without it: in step with servers sharing the voices directory
    try:
        yield
    finally:
        await directory_watch.stop(app)
        await state_url.stop(app)
        for task in (supervising, starting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await backend.stop()
        app.state.service.encode_pool.close()


def create_app(settings: Settings | None = None, backend: Backend | None = None) -> FastAPI:
    """A polyvox app serving `engine`; its lifespan starts it.

    The default engine is the one `settings` select behind the text front end (lexicon, normalisation,
    long-text splitting); an engine passed in is served as given (wrap it with
    `backends.factory.with_text_frontend` for the front end)."""
    settings = settings or Settings()
    if backend is None:
        from polyvox.backends.factory import build_backend

        backend = build_backend(settings)
    metrics = Metrics()
    log.info("%s", describe_cache(settings))
    app = FastAPI(title="polyvox", version=__version__, lifespan=_lifespan)
    app.state.keyring = KeyRing.from_settings(settings)
    app.state.lifecycle = Lifecycle()
    app.state.settings = settings
    app.state.backend = backend
    app.state.lexicon = backend.lexicon
    app.state.metrics = metrics
    app.state.shared = state_url.connect(settings)  # with state_url: Redis, which holds the audio cache
    app.state.voices = VoiceRegistry.from_settings(settings, backend.info)
    cache_store = open_store(settings, metrics, app.state.shared)
    app.state.service = SpeechService(
        backend, settings, metrics, app.state.voices, cache_store, app.state.lifecycle
    )
    app.state.supervisor = BackendSupervisor(backend, app.state.lifecycle, metrics)
    metrics.registry.register(VoiceCollector(app.state.voices, backend))
    metrics.registry.register(BatchingStatsCollector(backend))
    app.state.backend_failure = None
    app.state.freezing_voices = False
    app.state.created = int(time.time())
    install_error_handlers(app)
    quiet_cut_streams()  # a stream cut by its deadline is an answered outcome, not an app error
    voices.install_voice_errors(app)
    app.include_router(speech_route.router)
    app.include_router(catalog.router)
    app.include_router(voices.router)
    app.include_router(consents.router)
    app.include_router(websocket_route.router)
    app.include_router(lexicon.router)
    app.include_router(lora.router)
    app.include_router(health.router)
    if settings.ui:
        ui.install(app)
    # Every path needs an API key when keys are configured (but auth.OPEN_PATHS), checked before routing;
    # the metrics middleware, outside it and the body deadline, counts the refusals and the 408s too; the
    # request id, outermost, names every answer and log line.
    state_url.install(app)  # with state_url, the guard (inside auth)
    fresh_reads.install(app)  # reads see what any server sharing the state wrote (inside auth)
    app.add_middleware(AuthMiddleware)
    app.add_middleware(BodyDeadlineMiddleware, timeout_s=settings.request_read_timeout_s)
    app.add_middleware(MetricsMiddleware, metrics=metrics, root=app)
    app.add_middleware(RequestIdMiddleware)
    return app
