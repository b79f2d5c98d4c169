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
from polyvox.cache import describe_cache
from polyvox.engines.base import Engine
from polyvox.server import shared_state
from polyvox.server.auth import AuthMiddleware, KeyRing
from polyvox.server.engine_metrics import EngineStatsCollector
from polyvox.server.errors import install_error_handlers
from polyvox.server.lifecycle import Lifecycle
from polyvox.server.metrics import Metrics, MetricsMiddleware
from polyvox.server.routes import catalog, health, lexicon, speech, ui, voice_consents, voices, websocket
from polyvox.server.streaming import quiet_cut_streams
from polyvox.server.supervisor import EngineSupervisor
from polyvox.server.synthesis import SpeechService
from polyvox.settings import Settings
from polyvox.voices.metrics import VoiceCollector
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


async def _start_engine(app: FastAPI, engine: Engine) -> None:
    started = time.perf_counter()
    try:
        await engine.start()
    except Exception as exc:
        app.state.engine_failure = f"{type(exc).__name__}: {exc}"
        # An expected failure (memory, a missing kernel...): one line; the traceback at debug level.
        log.error(
            "engine %s failed to start: %s",
            engine.info.name,
            app.state.engine_failure,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        return
    app.state.supervisor.served = True
    log.info("engine %s ready in %.1f s", engine.info.name, time.perf_counter() - started)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the engine in the background (so /health and /ready answer while it warms), restart it if
    it stops serving, stop it at exit."""
    engine: Engine = app.state.engine
    starting = asyncio.create_task(_start_engine(app, engine))
    supervising = asyncio.create_task(app.state.supervisor.run())
    await voices.load_voices(app)
    await shared_state.start(app)  # state_url: voices and the lexicon in step with the other replicas
    try:
        yield
    finally:
        await shared_state.stop(app)
        for task in (supervising, starting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await engine.stop()


def create_app(settings: Settings | None = None, engine: Engine | None = None) -> FastAPI:
    """A polyvox app serving `engine`; its lifespan starts it.

    The default engine is the one `settings` select behind the text front end (lexicon, normalisation,
    long-text splitting); an engine passed in is served as given (wrap it with
    `engines.factory.with_text_frontend` for the front end)."""
    settings = settings or Settings()
    if engine is None:
        from polyvox.engines.factory import build_speech_engine

        engine = build_speech_engine(settings)
    metrics = Metrics()
    log.info("%s", describe_cache(settings))
    app = FastAPI(title="polyvox", version=__version__, lifespan=_lifespan)
    app.state.keyring = KeyRing.from_settings(settings)
    app.state.lifecycle = Lifecycle()
    app.state.settings = settings
    app.state.engine = engine
    app.state.lexicon = getattr(getattr(engine, "frontend", None), "lexicon", None)
    app.state.metrics = metrics
    app.state.service = SpeechService(engine, settings, metrics, app.state.lifecycle)
    app.state.supervisor = EngineSupervisor(engine, app.state.lifecycle, metrics)
    app.state.voices = app.state.service.voice_registry = VoiceRegistry.from_settings(settings)
    metrics.registry.register(VoiceCollector(app.state.voices, engine))
    metrics.registry.register(EngineStatsCollector(engine))
    app.state.engine_failure = None
    app.state.created = int(time.time())
    install_error_handlers(app)
    quiet_cut_streams()  # a stream cut by its deadline is an answered outcome, not an app error
    voices.install_voice_errors(app)
    app.include_router(speech.router)
    app.include_router(catalog.router)
    app.include_router(voices.router)
    app.include_router(voice_consents.router)
    app.include_router(websocket.router)
    app.include_router(lexicon.router)
    app.include_router(health.router)
    if settings.ui:
        ui.install(app)
    # Every path needs an API key when keys are configured (but auth.OPEN_PATHS), checked before routing;
    # the metrics middleware, outside it, counts the refusals too.
    shared_state.install(app)  # state_url: the audio cache in Redis, and the guard (inside auth)
    app.add_middleware(AuthMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics, root=app)
    return app
