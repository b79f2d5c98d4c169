"""`AppState`: everything a polyvox app is built with, typed, in one object. `create_app` makes it once
and keeps it as `app.state.polyvox`; the rest of the server reads it through `app_state(app)` (or the
`deps.get_state` dependency), never by probing `app.state` for attributes."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from polyvox.backends.base import Backend
    from polyvox.backends.text_pipeline import TextPipeline
    from polyvox.server.key_ring import KeyRing
    from polyvox.server.lifecycle.draining import Lifecycle
    from polyvox.server.lifecycle.idle_unload import ColdStart
    from polyvox.server.lifecycle.supervisor import BackendSupervisor
    from polyvox.server.metrics import Metrics
    from polyvox.server.speech.synthesis import SpeechService
    from polyvox.server.tenancy.authorization import Authorizer
    from polyvox.server.tenancy.service import Tenancy
    from polyvox.settings import Settings
    from polyvox.state.replica_sync import ReplicaSync
    from polyvox.text.lexicon import Lexicon
    from polyvox.voices.directory_watch import DirectoryWatch
    from polyvox.voices.registry import VoiceRegistry


@dataclass
class AppState:
    """One app's settings and the objects made of them; the last two fields change as it runs."""

    settings: Settings
    backend: Backend  # the model back end, served as it is
    text: TextPipeline  # the text step: each request's pieces for its plan, spoken on `backend`
    metrics: Metrics
    keyring: KeyRing  # the keys of the settings
    authorizer: Authorizer  # who a request comes from: the settings' keys, then the named keys
    tenancy: Tenancy  # named keys, their limits and usage
    lifecycle: Lifecycle  # the drain
    voices: VoiceRegistry
    service: SpeechService
    supervisor: BackendSupervisor
    shared: ReplicaSync | None  # with `state_url`: this replica's sync with Redis
    directory_watch: DirectoryWatch | None  # without it: the voices directory and lexicon file watched
    created: int = field(default_factory=lambda: int(time.time()))  # /v1/models' `created`
    backend_failure: str | None = None  # why the back end failed its first start
    freezing_voices: bool = False  # `freeze_voices_at_start` or `warmup` running: /ready waits for it
    cold_start: ColdStart | None = None  # idle_unload_s / load_on_demand: the back end loaded on demand
    # api_server_count > 1: the numbers of the other API processes on the port still starting (/ready 503)
    peers_starting: Callable[[], list[int]] | None = None
    # The first start's two ends, set once by the lifespan: the back end's start is over (it came up, it
    # failed, or it loads on demand), then the rest of the start-up too (the voices frozen, the warm-up)
    engine_tried: asyncio.Event = field(default_factory=asyncio.Event)
    start_up_done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def lexicon(self) -> Lexicon | None:
        """The pronunciation lexicon of the text step's front end, if it has one."""
        return self.text.lexicon


def app_state(app: Any) -> AppState:
    """The state `create_app` gave `app` (a Starlette app: `request.app`, `scope["app"]`)."""
    state: AppState = app.state.polyvox
    return state
