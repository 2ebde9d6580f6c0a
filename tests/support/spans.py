"""Spans recorded in process: while a test holds :func:`recording`, memstream's
tracer (``streams.tracing.TRACER``) is one of an OpenTelemetry SDK provider of the
test's own, which keeps the spans that end; outside the block it is the API's
again (non-recording), so no other test sees a trace context it did not make."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from streams import tracing


class _Kept(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


@contextmanager
def recording() -> Iterator[list[ReadableSpan]]:
    """The spans that end inside the block (the list fills as they end)."""
    kept = _Kept()
    provider = TracerProvider()
    provider.add_span_processor(kept)
    before = tracing.TRACER
    tracing.TRACER = provider.get_tracer("memstream")  # type: ignore[misc]
    try:
        yield kept.spans
    finally:
        tracing.TRACER = before  # type: ignore[misc]


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]
