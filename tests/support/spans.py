"""Spans recorded in process: an OpenTelemetry SDK tracer provider installed once
per test process, which keeps the spans that end while a test holds
:func:`recording` (and nothing otherwise)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider


class _Kept(SpanProcessor):
    def __init__(self) -> None:
        self.on = False
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.spans.append(span)


_KEPT = _Kept()
_installed = False


@contextmanager
def recording() -> Iterator[list[ReadableSpan]]:
    """The spans that end inside the block (the list fills as they end)."""
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(_KEPT)
        trace.set_tracer_provider(provider)
        _installed = True
    _KEPT.spans = []
    _KEPT.on = True
    try:
        yield _KEPT.spans
    finally:
        _KEPT.on = False


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]
