"""The access line: one per HTTP request, logged by `polyvox.access` once its answer has been sent (or
cut), so it can say how long the request took and how many bytes it sent; uvicorn's own access line,
logged when the answer starts, is off (`logs.log_config`). A speech request's line also names its
voice, format, whether it streamed, its cache outcome (X-Cache) and its time to first audio, which the
speech service notes on the request's `AccessRecord` as it learns them. In a JSON log each is a key of
its own (`logs.JsonFormatter`); in a text log they follow the request line."""

from __future__ import annotations

import contextvars
import logging
from dataclasses import asdict, dataclass
from typing import Any

from starlette.types import Scope

log = logging.getLogger("polyvox.access")


@dataclass(slots=True)
class AccessRecord:
    """What a request's access line says beyond HTTP, noted while it runs; None where it did not apply."""

    voice: str | None = None
    format: str | None = None
    stream: bool | None = None
    cache: str | None = None
    first_audio_s: float | None = None


_current: contextvars.ContextVar[AccessRecord | None] = contextvars.ContextVar("access_record", default=None)


def begin() -> AccessRecord:
    """A fresh record for the HTTP request running in this context (its tasks share it)."""
    record = AccessRecord()
    _current.set(record)
    return record


def note_speech(voice: str, fmt: str, stream: bool, cache: str | None) -> None:
    """The speech request's voice, response format, streaming and X-Cache outcome."""
    if (record := _current.get()) is not None:
        record.voice, record.format, record.stream, record.cache = voice, fmt, stream, cache


def note_first_audio(seconds: float) -> None:
    """Seconds from the speech request's acceptance to its first audio ready to send."""
    if (record := _current.get()) is not None:
        record.first_audio_s = seconds


def log_access(scope: Scope, status: int, duration_s: float, sent: int, record: AccessRecord) -> None:
    """Log the request's access line (INFO; nothing when `polyvox.access` is quieter)."""
    if not log.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    path = scope.get("path", "")
    if query := scope.get("query_string", b""):
        path = f"{path}?{query.decode('latin-1')}"
    fields: dict[str, Any] = {
        "client": f"{client[0]}:{client[1]}" if client else None,
        "method": scope.get("method"),
        "path": path,
        "http_version": scope.get("http_version"),
        "status": status,
        "duration_s": round(duration_s, 6),
        "bytes": sent,
    }
    speech = {name: value for name, value in asdict(record).items() if value is not None}
    fields.update(speech)
    text = " ".join(f"{name}={_shown(value)}" for name, value in speech.items())
    log.info(
        '%s - "%s %s HTTP/%s" %d %.3fs %dB%s',
        fields["client"] or "-",
        fields["method"],
        path,
        fields["http_version"],
        status,
        duration_s,
        sent,
        f" {text}" if text else "",
        extra={"fields": fields},
    )


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3f}s"
    return str(value)
