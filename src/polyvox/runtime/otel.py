"""OpenTelemetry, when the `otel` extra is installed and `otel_traces` is on: the process's tracer
provider (one that the host process installed is kept, so tests and embedding applications choose
their own exporter) and the W3C trace context that crosses to an engine process inside its messages.
Without the extra every function here is a no-op, so no layer needs to know whether traces are on.

The exporter is chosen as OpenTelemetry's variables say: `OTEL_TRACES_EXPORTER` `otlp` (the default:
OTLP over HTTP, `OTEL_EXPORTER_OTLP_ENDPOINT` and the other `OTEL_EXPORTER_OTLP_*`), `console` (one
JSON object per span on stderr) or `none`; `OTEL_SERVICE_NAME` names the service (`polyvox`)."""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    from opentelemetry import propagate, trace
except ImportError:  # the `otel` extra is not installed
    trace = None  # type: ignore[assignment]

TRACER_NAME = "polyvox"
_installed = False


def available() -> bool:
    """Whether the OpenTelemetry SDK is installed (the `otel` extra)."""
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return trace is not None


def install_provider() -> None:
    """Make this process's spans go to the exporter OpenTelemetry's variables name, unless the host
    process installed a provider of its own already. Raises ImportError without the `otel` extra, and
    ValueError for an exporter polyvox does not know."""
    global _installed
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if _installed or isinstance(trace.get_tracer_provider(), TracerProvider):
        _installed = True
        return
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):  # neither named it
        resource = resource.merge(Resource({"service.name": "polyvox"}))
    provider = TracerProvider(resource=resource)
    exporter = _exporter(os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower())
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _installed = True


def _exporter(name: str) -> Any:
    if name == "none":
        return None
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
    if name != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER={name!r}: polyvox exports to otlp, console or none")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def flush() -> None:
    """Export the spans still held (an engine process about to exit)."""
    if trace is not None and hasattr(provider := trace.get_tracer_provider(), "force_flush"):
        provider.force_flush()


def tracer() -> Any:
    """This process's tracer (a no-op one until a provider is installed); None without the extra."""
    return trace.get_tracer(TRACER_NAME) if trace is not None else None


def current_context() -> dict[str, str]:
    """The current span's W3C trace context (`traceparent`...) as a carrier to send along; empty
    outside a recorded span or without the extra."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def annotate(name: str, value: str) -> None:
    """Set an attribute on the current span, when one is recorded."""
    if trace is not None and (span := trace.get_current_span()).is_recording():
        span.set_attribute(name, value)


def context_from(carrier: dict[str, str]) -> Any:
    """The context a carrier (`current_context` of another process, HTTP headers) names as parent."""
    return propagate.extract(carrier) if trace is not None else None
