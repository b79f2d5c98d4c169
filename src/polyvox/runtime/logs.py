"""One log format for polyvox's and uvicorn's lines: `text` (one readable line each) or `json` (one
JSON object per line, a line's own fields as keys). Every line an HTTP request causes carries its
request id (`http_request_id_var`: the client's `X-Request-ID` or a fresh one, set by
`server.request_id`); a WebSocket session's lines carry the id of the synthesis they belong to
(`request_id_var`, set where a synthesis is prepared).
`RequestIdFilter` puts the id on each record."""

from __future__ import annotations

import contextvars
import json
import logging
import time
from typing import Any, Literal

LogFormat = Literal["text", "json"]

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
http_request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "http_request_id", default=None
)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s:%(request_tag)s %(message)s"


def current_request_id() -> str | None:
    """The id the lines logged here belong to: the HTTP request's (the one its client sees in
    `X-Request-Id`), else the synthesis's; None outside a request."""
    return http_request_id_var.get() or request_id_var.get()


class RequestIdFilter(logging.Filter):
    """Adds `request_id` (None outside a request) and `request_tag` (" [id]" or "") to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = current_request_id()
        record.request_id = request_id
        record.request_tag = f" [{request_id}]" if request_id else ""
        return True


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time, level, logger, message, request_id when in a request, the
    exception's traceback when there is one, and the keys of the record's `fields` (logged with
    `extra={"fields": {...}}`: the access line's method, path, status, duration_s, bytes...)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)  # set by RequestIdFilter
        if request_id:
            entry["request_id"] = request_id
        fields = getattr(record, "fields", None)  # a line's own keys (the access line's status, bytes...)
        if isinstance(fields, dict):
            entry.update((key, value) for key, value in fields.items() if key not in entry)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def log_config(level: str, fmt: LogFormat = "text") -> dict[str, Any]:
    """A `logging.config.dictConfig` for the whole process, uvicorn's loggers included (pass it as
    uvicorn's `log_config`, so uvicorn does not install its own format)."""
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if fmt == "json" else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"polyvox": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "polyvox",
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            **{
                name: {"handlers": [], "propagate": True, "level": level.upper()}
                for name in ("uvicorn", "uvicorn.error")
            },
            # uvicorn's access line is logged when an answer starts, before its duration and size are
            # known: off (a logger with no handlers, which uvicorn then does not call), and
            # `polyvox.access` logs one when the answer ends (`server/access_log.py`).
            "uvicorn.access": {"handlers": [], "propagate": False},
        },
    }


def setup_logging(level: str, fmt: LogFormat = "text") -> dict[str, Any]:
    """Configure the process's logging; returns the config for uvicorn."""
    import logging.config

    config = log_config(level, fmt)
    logging.config.dictConfig(config)
    return config
