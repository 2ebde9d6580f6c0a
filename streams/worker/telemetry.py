"""The OpenTelemetry SDK, configured from the standard ``OTEL_*`` variables.

Tracing is off unless an exporter is asked for: ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, or ``OTEL_TRACES_EXPORTER`` naming
``otlp`` or ``console``; ``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER=none``, or
an ``OTEL_TRACES_EXPORTER`` naming neither of those two, keep it off. Off, no SDK is
loaded and the spans of :mod:`streams.tracing` are non-recording (the upstream's
trace context still passes through).

On, the SDK reads the rest of the standard variables itself: the service name
(``OTEL_SERVICE_NAME``, default ``memstream``), the resource
(``OTEL_RESOURCE_ATTRIBUTES``), the sampler (``OTEL_TRACES_SAMPLER``, default
``parentbased_always_on``: an upstream's decision is kept; for 1 % of new traces
``parentbased_traceidratio`` with ``OTEL_TRACES_SAMPLER_ARG=0.01``), the OTLP
endpoint, headers, protocol (HTTP/protobuf) and timeout, and the batch processor's
queue and delay (``OTEL_BSP_*``). Spans are exported in the batch processor's
thread, off the event loop; a full queue drops spans, never waits.

The HTTP client (provider and model calls), the SQLAlchemy engines and Redis get
the OpenTelemetry instrumentations, so their calls are spans of the trace that made
them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from streams import tracing
from streams.worker.span_redaction import RedactingExporter

log = logging.getLogger(__name__)

_ON = {"otlp", "console"}
_provider: Any = None
_engines: list[Any] = []  # the instrumented engines' sync engines


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Whether ``env`` asks for traces to be exported."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",")
                 if e.strip()}
    if "none" in exporters or (exporters and not exporters & _ON):
        return False  # off, or only exporters memstream does not ship (zipkin, ...)
    return bool(exporters & _ON) or bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip())


def refusal(env: Mapping[str, str] = os.environ) -> str | None:
    """Why the tracing ``env`` asks for cannot be given (None: it can): memstream
    ships OTLP over HTTP/protobuf only."""
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    if protocol != "http/protobuf":
        return (f"OTLP protocol {protocol!r} is not shipped: set OTEL_EXPORTER_OTLP_PROTOCOL="
                "http/protobuf and the collector's HTTP endpoint (port 4318); tracing is off")
    return None


def configure(env: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK's tracer provider and the instrumentations when ``env`` asks
    for traces (once per process); whether tracing is on."""
    global _provider
    if _provider is not None:
        return True
    if not wanted(env):
        return False
    if (why := refusal(env)) is not None:
        log.error("%s", why)
        return False
    from opentelemetry import trace
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    service = env.get("OTEL_SERVICE_NAME") or "memstream"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
                 if e.strip()} or {"otlp"}
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(BatchSpanProcessor(RedactingExporter(OTLPSpanExporter())))
    if "console" in exporters:
        provider.add_span_processor(BatchSpanProcessor(RedactingExporter(ConsoleSpanExporter())))
    trace.set_tracer_provider(provider)
    RedisInstrumentor().instrument(tracer_provider=provider)
    _provider = provider
    tracing.start_exporting()
    log.info("tracing on: service %s, exporters %s", service, ", ".join(sorted(exporters)))
    return True


def instrument_engine(engine: Any) -> None:
    """Spans for the SQL statements of a SQLAlchemy async engine (tracing on only).

    The instrumentation takes its engines in one call: each new engine instruments
    all of them again (dropping the listeners of the call before)."""
    if _provider is None:
        return
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
    _engines.append(engine.sync_engine)
    instrumentor = SQLAlchemyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    # its declared range stops below SQLAlchemy 2.1, whose engine events it hooks
    # are unchanged: the trace test checks the statements' spans
    instrumentor.instrument(engines=list(_engines), tracer_provider=_provider,
                            enable_commenter=False, skip_dep_check=True)


def instrument_http(client: Any) -> None:
    """Spans for the requests of an ``httpx.AsyncClient`` (tracing on only)."""
    if _provider is None:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=_provider)


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered (the runtime's last step, in a thread: it blocks while
    the collector does not answer; the SDK shuts down at exit)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)
