"""Traces: the W3C trace context read from and written to Kafka record headers,
and the spans memstream opens.

The chat service's producer (Spring Kafka with Micrometer Tracing, the
OpenTelemetry Java agent, the OTel instrumentations of confluent-kafka or
kafkajs) writes ``traceparent`` (with ``tracestate`` and ``baggage``) on each
record. memstream continues that trace: a span it opens for a record is a child
of the record's context (:func:`consumer_span`), and every record it produces
carries the context of the span it was produced in (:func:`with_context`), so a
reply, a session-closed event, a retry or a dead letter — and a replay or a
re-drive of them — keeps its origin. Where one piece of work has many parents
(a consolidation run and the messages of its session, an ingest batch and its
records), the span links to them (:func:`links_of`).

This module uses only the OpenTelemetry API: with no SDK configured
(:mod:`streams.worker.telemetry` configures one from the standard ``OTEL_*``
variables), every span is a non-recording one and costs next to nothing, and the
upstream's context still passes through to what memstream produces. Spans carry
identifiers, counts and outcomes, never a message's content.

Attribute names follow the OpenTelemetry semantic conventions for messaging
(``messaging.*``) and GenAI (``gen_ai.*``); memstream's own are ``memstream.*``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context as _Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from streams.wire.envelope import DeadLettered, Handled, Outgoing, ToSend
from streams.wire.headers import BAGGAGE, TRACE_HEADERS, TRACEPARENT, TRACESTATE, Header, Headers

TRACER: Final = trace.get_tracer("memstream")
Context = _Context  # a trace context, to carry across tasks (current, attached)

# ── attribute names (semantic conventions) ─────────────────────────────────
MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
MESSAGING_DESTINATION: Final = "messaging.destination.name"
MESSAGING_PARTITION: Final = "messaging.destination.partition.id"
MESSAGING_OFFSET: Final = "messaging.kafka.offset"
MESSAGING_BATCH_COUNT: Final = "messaging.batch.message_count"
TENANT: Final = "memstream.tenant_id"
OUTCOME: Final = "memstream.outcome"

_exporting = False


def start_exporting() -> None:
    """Spans are exported from now on (:mod:`streams.worker.telemetry` installed an
    SDK): links to the records' traces are worth keeping."""
    global _exporting
    _exporting = True


def exporting() -> bool:
    """Whether spans are exported: what only a recorded span uses (links to the
    records' traces) is computed only then."""
    return _exporting


CONSUMER: Final = SpanKind.CONSUMER
CLIENT: Final = SpanKind.CLIENT

MAX_LINKS: Final = 128
"""At most this many links on one span (an ingest batch, a consolidation run)."""


class _HeaderGetter(Getter[Sequence[Header]]):
    def get(self, carrier: Sequence[Header], key: str) -> list[str] | None:
        found = [v.decode("latin-1") for k, v in carrier if k == key]
        return found or None

    def keys(self, carrier: Sequence[Header]) -> list[str]:
        return [k for k, _ in carrier]


class _HeaderSetter(Setter[Headers]):
    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier.append((key, value.encode("latin-1")))


_GETTER: Final = _HeaderGetter()
_SETTER: Final = _HeaderSetter()


_MAX_BYTES: Final = {TRACEPARENT: 256, TRACESTATE: 512, BAGGAGE: 8192}
"""Longer values are not read (W3C: a tracestate of at most 512 characters, baggage of
at most 8,192 bytes): a hostile producer's megabyte header is neither parsed nor logged."""


def context_of(headers: Sequence[Header] | None) -> otel_context.Context | None:
    """The trace context a record's headers carry; None when they carry none."""
    if not headers or not any(k == TRACEPARENT for k, _ in headers):
        return None
    kept = [(k, v) for k, v in headers if k in _MAX_BYTES and len(v) <= _MAX_BYTES[k]]
    return propagate.extract(kept, getter=_GETTER)


def links_of(contexts: Iterable[Sequence[Header] | str | None],
             limit: int = MAX_LINKS) -> list[Link]:
    """Links to the spans that ``contexts`` name (records' headers, or ``traceparent``
    values), the valid ones, at most ``limit``, in order."""
    links: list[Link] = []
    for c in contexts:
        if len(links) >= limit:
            break
        if isinstance(c, str):
            if not c.isascii():
                continue
            c = [(TRACEPARENT, c.encode("ascii"))]
        ctx = context_of(c)
        if ctx is None:
            continue
        span_context = trace.get_current_span(ctx).get_span_context()
        if span_context.is_valid:
            links.append(Link(span_context))
    return links


def traceparent_of(headers: Sequence[Header] | None) -> str | None:
    """The ``traceparent`` a record carries, when its trace is sampled and spans are
    exported: what a later span links to (an unsampled one would name a span no one
    recorded)."""
    if not _exporting:
        return None
    ctx = context_of(headers)
    if ctx is None:
        return None
    span_context = trace.get_current_span(ctx).get_span_context()
    if not (span_context.is_valid and span_context.trace_flags.sampled):
        return None
    carrier: Headers = []
    propagate.inject(carrier, context=ctx, setter=_SETTER)
    for k, v in carrier:
        if k == TRACEPARENT:
            return v.decode("latin-1")
    return None


def with_context(headers: Sequence[Header] = (),
                 ctx: otel_context.Context | None = None) -> Headers:
    """``headers`` with the trace context of ``ctx`` (default: the current one) in
    place of any they carried; unchanged when there is none."""
    carrier: Headers = []
    propagate.inject(carrier, context=ctx, setter=_SETTER)
    if not carrier:
        return list(headers)
    return [*(h for h in headers if h[0] not in TRACE_HEADERS), *carrier]


def stamped(handled: Handled) -> Handled:
    """``handled`` with every record it sends carrying the current trace context."""
    if isinstance(handled, DeadLettered):
        return DeadLettered(stamp(handled.dead_letter), handled.reason,
                            tuple(stamp(r) for r in handled.replies))
    return ToSend(tuple(stamp(r) for r in handled.records), handled.outcome)


def stamp(record: Outgoing) -> Outgoing:
    """``record`` carrying the current trace context (:func:`with_context`)."""
    return dataclasses.replace(record, headers=with_context(record.headers))


def current() -> Context:
    """The current trace context, to carry into work that runs elsewhere later."""
    return otel_context.get_current()


@contextlib.contextmanager
def attached(ctx: Context | None) -> Iterator[None]:
    """The block runs in ``ctx`` (from :func:`current`; None: as it is)."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def kafka_attributes(topic: str, partition: int | None = None, offset: int | None = None,
                     *, operation: str = "process") -> dict[str, AttributeValue]:
    """The messaging attributes of a span over one record of ``topic``."""
    attrs: dict[str, AttributeValue] = {
        MESSAGING_SYSTEM: "kafka", MESSAGING_OPERATION_TYPE: operation,
        MESSAGING_OPERATION_NAME: operation, MESSAGING_DESTINATION: topic}
    if partition is not None:
        attrs[MESSAGING_PARTITION] = str(partition)
    if offset is not None:
        attrs[MESSAGING_OFFSET] = offset
    return attrs


@contextlib.contextmanager
def consumer_span(name: str, headers: Sequence[Header] | None,
                  attributes: Mapping[str, AttributeValue] | None = None, *,
                  links: Sequence[Link] = ()) -> Iterator[Span]:
    """A span (kind consumer) over the processing of a record, the child of the
    context its ``headers`` carry (a new trace when they carry none), current
    while the block runs; an exception escaping the block marks it failed (with the
    exception's type, never its message)."""
    with TRACER.start_as_current_span(name, context=context_of(headers),
                                      kind=SpanKind.CONSUMER, attributes=attributes,
                                      links=links, record_exception=False,
                                      set_status_on_exception=False) as span, _failing(span):
        yield span


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, AttributeValue] | None = None, *,
         kind: SpanKind = SpanKind.INTERNAL, links: Sequence[Link] = ()) -> Iterator[Span]:
    """A child span of the current one, current while the block runs."""
    with TRACER.start_as_current_span(name, kind=kind, attributes=attributes, links=links,
                                      record_exception=False,
                                      set_status_on_exception=False) as s, _failing(s):
        yield s


@contextlib.contextmanager
def _failing(s: Span) -> Iterator[None]:
    """An exception escaping the block marks ``s`` failed with the exception's type
    only: an exception's message may hold content (a driver's error quotes a row)."""
    try:
        yield
    except BaseException as exc:
        failed(s, type(exc).__name__)
        raise


@contextlib.contextmanager
def producer_span(topic: str, partition: int | None = None) -> Iterator[Span]:
    """A span (kind producer) over sending one record to ``topic``: the record sent
    inside it carries its context (:func:`with_context`)."""
    with TRACER.start_as_current_span(
            f"send {topic}", kind=SpanKind.PRODUCER,
            attributes=kafka_attributes(topic, partition, operation="send"),
            record_exception=False, set_status_on_exception=False) as s, _failing(s):
        yield s


def annotate(attributes: Mapping[str, AttributeValue]) -> None:
    """Set ``attributes`` on the current span (nothing when it does not record)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(attributes)


def failed(s: Span, description: str) -> None:
    """Mark ``s`` failed with ``description`` (a reason code, never content)."""
    s.set_status(Status(StatusCode.ERROR, description))

