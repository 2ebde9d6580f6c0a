"""Load that arrives traced, for the benchmarks that measure what tracing costs
(`bench/ingest.py --sampled-share`, `bench/query.py --sampled-share`): each chat
event or query carries a W3C ``traceparent`` of its own, as from a producer with
its tracing instrumentation, and a ``share`` of them say the producer sampled
the trace (memstream's parent-based sampler records exactly those)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags


def span_context(rng: random.Random, share: float) -> SpanContext:
    """A new trace's span, sampled with probability ``share``."""
    return SpanContext(trace_id=rng.getrandbits(128) or 1, span_id=rng.getrandbits(64) or 1,
                       is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED if rng.random() < share else 0))


def traceparent(rng: random.Random, share: float) -> str:
    """The ``traceparent`` header of :func:`span_context`."""
    c = span_context(rng, share)
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


@contextlib.contextmanager
def inside_a_trace(rng: random.Random, share: float) -> Iterator[None]:
    """The block runs inside a producer's span (:func:`span_context`): what
    ``MemoryClient`` sends in it carries the trace."""
    with trace.use_span(NonRecordingSpan(span_context(rng, share))):
        yield
