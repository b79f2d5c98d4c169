"""The audio cache as speech requests use it: whether a request may use it (its X-Cache status), the
key it is stored under, and lookups and stores in worker threads, off the event loop. An entry keeps
the answer's word timings with its audio when it was timed; a request asking for them hits only such
an entry.

X-Cache is HIT, MISS, BYPASS, ADHOC or DISABLED, and MISS-STORE-FAILED for a miss whose audio could
not be stored (only a whole-file answer can say so: a stream's headers leave before its audio is stored)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import numpy as np

from polyvox.backends.base import Backend, SynthesisRequest
from polyvox.cache import AudioStore, backend_fingerprint, cache_key, open_cache
from polyvox.server.metrics import Metrics
from polyvox.server.speech.job import SpeechJob
from polyvox.settings import Settings

if TYPE_CHECKING:
    from polyvox.state.replica_sync import ReplicaSync
    from polyvox.text.lexicon import Lexicon

log = logging.getLogger(__name__)

STORE_FAILED = "MISS-STORE-FAILED"


def open_store(settings: Settings, metrics: Metrics, shared: ReplicaSync | None) -> AudioStore | None:
    """The audio cache the settings ask for, chosen once: in Redis with `state_url` (`shared`), where
    every replica finds it; else on disk. None when caching is off, or its directory cannot be written."""
    if not settings.cache_enabled:
        return None
    if shared is not None:
        ttl_s = settings.cache_ttl_minutes * 60.0
        return shared.audio_cache(settings.cache_max_bytes, ttl_s, metrics.cache_changed)
    return open_cache(
        settings.cache_dir, settings.cache_max_bytes, settings.cache_ttl_minutes, metrics.cache_changed
    )


class SpeechCache:
    """An `AudioStore` (None when caching is off) behind the speech path's rules for using it."""

    def __init__(self, store: AudioStore | None, metrics: Metrics, limiter: anyio.CapacityLimiter):
        self.store = store
        self.metrics = metrics
        self.limiter = limiter

    def assign(
        self,
        request: SynthesisRequest,
        client_seed: int | None,
        backend: Backend,
        lexicon: Lexicon | None,
        *,
        adhoc: bool,
        bypass: bool,
        voice_print: Callable[[], str | None],
    ) -> tuple[str, str | None]:
        """A request's X-Cache status and key: ADHOC for a one-off clone, DISABLED, BYPASS when the client
        asked, else MISS with the key of its back end, the text step's `lexicon`, request and voice
        (`voice_print()`). The key holds
        the client's seed, not the one drawn for a request without one: any audio of an unseeded
        request serves it."""
        if adhoc:
            return "ADHOC", None
        if self.store is None:
            return "DISABLED", None
        if bypass:
            return "BYPASS", None
        asked = replace(request, seed=client_seed)
        return "MISS", cache_key(backend_fingerprint(backend, lexicon), asked, voice_print())

    async def lookup(self, job: SpeechJob) -> None:
        """Look the job up (off the event loop); a hit makes it HIT and holds the audio."""
        if self.store is not None and job.plan.cache_key is not None:
            cached = await anyio.to_thread.run_sync(self.store.get, job.plan.cache_key, limiter=self.limiter)
            # An answer asked with timestamps needs an entry that kept them: one without is a miss (its
            # answer, timed, replaces the entry).
            if cached is not None and (job.plan.timeline is None or cached.pieces is not None):
                job.cached = cached
                job.cache_status = "HIT"
        self.metrics.cache_lookups.labels(result=job.cache_status.lower()).inc()

    async def put(self, job: SpeechJob, parts: list[np.ndarray], rate: int) -> None:
        """Cache a finished synthesis. A failure to store (the cache logs why) never fails the request:
        it turns the job's status into STORE_FAILED."""
        if self.store is None or job.plan.cache_key is None or not parts:
            return
        samples = np.concatenate(parts)
        timeline = job.plan.timeline
        pieces = timeline.engine_pieces if timeline is not None and timeline.complete else None
        try:
            stored = await anyio.to_thread.run_sync(
                self.store.put, job.plan.cache_key, samples, rate, pieces, limiter=self.limiter
            )
        except Exception:
            log.exception("audio cache store failed for request %s", job.plan.request.request_id)
            stored = False
        if not stored:
            job.cache_status = STORE_FAILED
