"""The application factory: `create_app(settings, backend, text)` wires the model back end, the text step in
front of it (`TextPipeline`: each request's pieces for its plan, spoken on the back end), admission control,
metrics, error translation and routers into one FastAPI app whose lifespan starts and stops the back end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable

import anyio
import uvicorn
from fastapi import FastAPI

from polyvox import __version__
from polyvox.backends.base import Backend
from polyvox.backends.text_pipeline import TextPipeline
from polyvox.cache import describe_cache
from polyvox.runtime.startup import stage
from polyvox.server import catalog, health, openapi_errors, tracing, ui
from polyvox.server.admin import keys as admin_keys
from polyvox.server.admin import lexicon, lora
from polyvox.server.app_state import AppState, app_state
from polyvox.server.auth import AuthMiddleware
from polyvox.server.batching_metrics import BatchingStatsCollector
from polyvox.server.body_deadline import BodyDeadlineMiddleware
from polyvox.server.build_info import BuildInfoCollector
from polyvox.server.elevenlabs import routes as elevenlabs_routes
from polyvox.server.errors import install_error_handlers
from polyvox.server.key_ring import KeyRing
from polyvox.server.lifecycle.draining import DrainingServer, Lifecycle
from polyvox.server.lifecycle.idle_unload import cold_start_for, watch_idle
from polyvox.server.lifecycle.supervisor import BackendSupervisor
from polyvox.server.lifecycle.warmup import warm_up
from polyvox.server.metrics import MetricsMiddleware
from polyvox.server.path_slashes import MergeSlashesMiddleware
from polyvox.server.request_id import RequestIdMiddleware
from polyvox.server.routers import add_routes
from polyvox.server.shared_state import fresh_reads, state_url
from polyvox.server.speech import route as speech_route
from polyvox.server.speech.caching import open_store
from polyvox.server.speech.streaming import quiet_cut_streams
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy import usage_route
from polyvox.server.tenancy.authorization import Authorizer
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.tenancy.streams import StreamLimitMiddleware
from polyvox.server.uttera_metrics import install_compat_metrics, metrics_for
from polyvox.server.voice_routes import consents, voices
from polyvox.server.websocket import route as websocket_route
from polyvox.server.wyoming.server import WyomingServer
from polyvox.settings import Settings
from polyvox.voices.directory_watch import DirectoryWatch
from polyvox.voices.freeze_at_start import freeze_builtin_voices, wants_freeze_at_start
from polyvox.voices.metrics import VoiceCollector
from polyvox.voices.registry import VoiceRegistry

log = logging.getLogger(__name__)


async def _start_backend(state: AppState) -> None:
    """The back end's first start, then the voices' freeze and the warm-up, each end announced on
    `state` (`engine_tried`, `start_up_done`) whichever way it went."""
    try:
        await _start_up(state)
    finally:
        state.engine_tried.set()
        state.start_up_done.set()


async def _start_up(state: AppState) -> None:
    backend = state.backend
    if state.cold_start is not None and state.cold_start.cold:
        log.info("load_on_demand: engine %s loads on the first request", backend.info.name)
        return
    settings = state.settings
    freeze = wants_freeze_at_start(settings.freeze_voices_at_start or settings.warmup, backend)
    # Set before the back end starts: with several ranks the back end is ready (and /ready would be 200) as
    # soon as one is up, long before the freeze and the warm-up, which wait for every rank, are done.
    state.freezing_voices = freeze or settings.warmup
    started = time.perf_counter()
    try:
        with stage(f"start the {backend.info.name} engine"):
            await backend.start()
    except Exception as exc:
        state.freezing_voices = False
        state.backend_failure = f"{type(exc).__name__}: {exc}"
        # An expected failure (memory, a missing kernel...): one line; the traceback at debug level.
        log.error(
            "engine %s failed to start: %s",
            backend.info.name,
            state.backend_failure,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )
        return
    finally:
        state.engine_tried.set()
    state.supervisor.served = True
    log.info("engine %s ready in %.1f s", backend.info.name, time.perf_counter() - started)
    try:
        if freeze:
            await freeze_builtin_voices(state.voices, backend)
        if settings.warmup:  # what the first requests would pay for, paid before /ready (lifecycle/warmup.py)
            await warm_up(backend, state.text, state.voices, settings)
    finally:
        state.freezing_voices = False


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the back end in the background (so /health and /ready answer while it warms), restart it if
    it stops serving, stop it at exit."""
    state = app_state(app)
    starting = asyncio.create_task(_start_backend(state))
    supervising = asyncio.create_task(state.supervisor.run())
    idling = asyncio.create_task(watch_idle(state.cold_start, state.service.busy))  # idle_unload_s
    with stage("load the registered voices"):
        await voices.load_voices(state.voices)
    # voices and the lexicon in step with the other replicas (Redis)
    await state_url.start(state.shared, state.voices, state.lexicon)
    if state.directory_watch is not None:  # without it: in step with servers sharing the voices directory
        state.directory_watch.start()
    wyoming = WyomingServer.for_app(state)  # wyoming_port: Home Assistant's TTS beside HTTP (None: off)
    if wyoming is not None:
        await wyoming.start()
    try:
        yield
    finally:
        if wyoming is not None:
            await wyoming.stop()
        if state.directory_watch is not None:
            await anyio.to_thread.run_sync(state.directory_watch.stop)
        await state_url.stop(state.shared)
        for task in (idling, supervising, starting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await state.backend.stop()
        state.service.encode_pool.close()


def create_app(
    settings: Settings | None = None, backend: Backend | None = None, text: TextPipeline | None = None
) -> FastAPI:
    """A polyvox app serving the model back end `backend`; its lifespan starts it. Every request's text
    goes through the text step `text`, which prepares its pieces for its plan and speaks them on the
    back end.

    By default both are the ones `settings` select and describe (`build_backend`, `build_text_pipeline`:
    lexicon, normalisation, long-text splitting). A back end passed without a text step is served as
    given: each request's text as written, in one piece (a text step without a front end)."""
    from polyvox.backends.factory import build_backend, build_text_pipeline

    settings = settings or Settings()
    if backend is None:
        backend = build_backend(settings)
        if text is None:
            text = build_text_pipeline(settings, backend)
    if text is None:
        text = TextPipeline()  # no front end: the back end served as given
    metrics = metrics_for(settings)
    log.info("%s", describe_cache(settings))
    telemetry = tracing.install(settings)  # otel_traces: FastAPI's span per request; off, none
    app = FastAPI(title="polyvox", version=__version__, lifespan=_lifespan, telemetry=telemetry)
    lifecycle = Lifecycle()
    shared = state_url.connect(settings)  # with state_url: Redis, which holds the audio cache
    registry = VoiceRegistry.from_settings(settings, backend.info)
    cache_store = open_store(settings, metrics, shared)
    # This server's copy of what servers share: Redis' with state_url; without it, the voices directory
    # and lexicon file (other servers may share them), watched.
    watch = None
    copy: fresh_reads.SharedCopy
    if shared is None:
        copy = watch = DirectoryWatch(registry, text.lexicon, settings.state_sync_interval_s)
    else:
        copy = shared
    supervisor = BackendSupervisor(backend, lifecycle, metrics)
    cold_start = cold_start_for(settings, backend, supervisor, metrics.registry)
    keyring = KeyRing.from_settings(settings)
    tenancy = Tenancy.build(
        settings,
        metrics.registry,
        shared.connection if shared else None,
        settings.require_api_key,
        not keyring.open,
    )
    authorizer = Authorizer(keyring, tenancy.keys, settings.public_model_list)
    app.state.polyvox = AppState(
        settings=settings,
        backend=backend,
        text=text,
        metrics=metrics,
        keyring=keyring,
        authorizer=authorizer,
        tenancy=tenancy,
        lifecycle=lifecycle,
        voices=registry,
        service=SpeechService(
            backend,
            text,
            settings,
            metrics,
            registry,
            cache_store,
            lifecycle,
            lambda: supervisor.served,
            cold_start=cold_start,
        ),
        supervisor=supervisor,
        shared=shared,
        directory_watch=watch,
        cold_start=cold_start,
    )
    metrics.registry.register(VoiceCollector(registry, backend))
    metrics.registry.register(BatchingStatsCollector(backend))
    metrics.registry.register(BuildInfoCollector())
    install_error_handlers(app, metrics.errors)
    quiet_cut_streams()  # a stream cut by its deadline is an answered outcome, not an app error
    voices.install_voice_errors(app, metrics)
    add_routes(app, speech_route.router)
    add_routes(app, catalog.router)
    add_routes(app, voices.router)
    add_routes(app, consents.router)
    add_routes(app, websocket_route.router)
    add_routes(app, elevenlabs_routes.router)  # /elevenlabs: ElevenLabs' clients (docs/agents.md)
    add_routes(app, lexicon.router)
    add_routes(app, lora.router)
    add_routes(app, admin_keys.router)
    add_routes(app, usage_route.router)
    add_routes(app, health.router)
    if settings.ui:
        ui.install(app)
    openapi_errors.install(app)  # the document lists each route's error answers, in OpenAI's shape
    # Every path needs an API key when keys are configured (but OPEN_PATHS, tenancy/authorization.py),
    # checked before routing; the metrics middleware, outside it and the body deadline, counts the
    # refusals and the 408s too; the request id, outermost, names every answer and log line.
    state_url.install(app, shared, metrics)  # with state_url, the guard (inside auth)
    fresh_reads.install(app, copy)  # reads see what any server sharing the state wrote (inside auth)
    # a named key's streams (inside auth, which names it)
    app.add_middleware(StreamLimitMiddleware, tenancy=tenancy)
    app.add_middleware(AuthMiddleware, authorizer=authorizer, metrics=metrics)
    app.add_middleware(BodyDeadlineMiddleware, timeout_s=settings.request_read_timeout_s, lifecycle=lifecycle)
    app.add_middleware(MetricsMiddleware, metrics=metrics, root=app)
    install_compat_metrics(app, metrics)  # metrics_compat's request counts, beside polyvox's
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(MergeSlashesMiddleware)  # `/v1//audio/speech` as `/v1/audio/speech`, before all
    return app


def draining_server(
    app: FastAPI,
    config: uvicorn.Config,
    repeat_sigterm_stops: bool = True,
    on_drained: Callable[[], bool] = lambda: True,
) -> DrainingServer:
    """The uvicorn server for an app `create_app` made: its drain flag, in-flight requests, grace period
    and the back end's start-up failure (see `DrainingServer`)."""
    state = app_state(app)
    return DrainingServer(
        config,
        state.lifecycle,
        busy=state.service.busy,
        grace_s=state.settings.shutdown_grace_s,
        failure=lambda: state.backend_failure,
        repeat_sigterm_stops=repeat_sigterm_stops,
        on_drained=on_drained,
    )
