"""Spans leave the worker without content in their error text.

memstream's own spans name an exception by its type only (``streams.tracing``).
The instrumentations it installs do not: SQLAlchemy's puts the driver's error
message in the span's status (a MySQL error quotes the row it refused), and an
``exception`` event carries the message and the stack. :class:`RedactingExporter`
passes every span to the real exporter with its status description and its
exception events' message through :func:`streams.redaction.redacted` (no SQL, no
parameters, no row values, no credentials) and without the stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from streams.redaction import redacted

_MESSAGE = "exception.message"
_STACK = "exception.stacktrace"


def scrubbed(span: ReadableSpan) -> ReadableSpan:
    """``span`` without content in its status description and exception events (the
    same object when it has none)."""
    status = span.status
    events = span.events
    dirty = bool(status.description) or any(_MESSAGE in (e.attributes or {}) or
                                            _STACK in (e.attributes or {}) for e in events)
    if not dirty:
        return span
    if status.description:
        status = Status(status.status_code, redacted(status.description))
    events = tuple(_event(e) for e in events)
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=span.attributes, events=events, links=span.links, kind=span.kind,
        status=status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


def _event(e: Event) -> Event:
    attrs = dict(e.attributes or {})
    if _STACK not in attrs and _MESSAGE not in attrs:
        return e
    attrs.pop(_STACK, None)
    if isinstance(attrs.get(_MESSAGE), str):
        attrs[_MESSAGE] = redacted(str(attrs[_MESSAGE]))
    return Event(e.name, attrs, e.timestamp)


class RedactingExporter(SpanExporter):
    """Exports through ``inner`` the :func:`scrubbed` spans."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.inner.export([scrubbed(s) for s in spans])

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
