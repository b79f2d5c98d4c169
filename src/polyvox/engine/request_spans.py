"""An engine process's OpenTelemetry spans of the requests it serves, in the trace of the API request
that sent them (its context comes in `Generate.trace`; empty, as it is while the API side does not
trace, means no span): `engine.prepare`, from the request's arrival to its prompt ready and admitted
to the batch (a clip's voice prompt encoded, the text tokenised), and `engine.generate`, from then to
its last patch (`polyvox.outcome`: finished, aborted or failed). The process exports them as
OpenTelemetry's variables say (`otel.install_provider`), installed with the first traced request."""

from __future__ import annotations

import os
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from polyvox.runtime import otel


@dataclass(slots=True)
class _Open:
    parent: Any  # the API request span's context
    received: int
    admitted: int | None = None


class RequestSpans:
    """The spans of the traced requests an engine process holds, by the key it knows them by."""

    def __init__(self) -> None:
        self._open: dict[Hashable, _Open] = {}
        self._attributes = {"polyvox.engine_pid": os.getpid()}

    def received(self, key: Hashable, carrier: dict[str, str]) -> None:
        if not carrier or not otel.available():
            return
        otel.install_provider()
        self._open[key] = _Open(otel.context_from(carrier), time.time_ns())

    def admitted(self, key: Hashable) -> None:
        if (request := self._open.get(key)) is None:
            return
        request.admitted = time.time_ns()
        self._span("engine.prepare", request, request.received, request.admitted)

    def ended(self, key: Hashable, outcome: str) -> None:
        """The request left the engine: `finished` (its last patch), `aborted` or `failed`."""
        if (request := self._open.pop(key, None)) is None:
            return
        now = time.time_ns()
        if request.admitted is None:  # it never reached the batch
            self._span("engine.prepare", request, request.received, now, outcome)
        else:
            self._span("engine.generate", request, request.admitted, now, outcome)

    def _span(self, name: str, request: _Open, start: int, end: int, outcome: str | None = None) -> None:
        attributes: dict[str, Any] = dict(self._attributes)
        if outcome is not None:
            attributes["polyvox.outcome"] = outcome
        span = otel.tracer().start_span(name, context=request.parent, start_time=start, attributes=attributes)
        span.end(end)
