"""One trace from the chat service's producer to memstream's reply, in a real
OTLP receiver.

The producer is librdkafka (confluent-kafka) with the OpenTelemetry
confluent-kafka instrumentation, exporting its own spans; the worker exports
over OTLP/HTTP (``OTEL_EXPORTER_OTLP_ENDPOINT``); both go to a real Jaeger
(``scripts/services.py up jaeger``, in memory), and the traces are read back
through Jaeger's query API (``/api/v3/traces/{id}``, OTLP JSON). Checked:

* a query: the producer's span is the parent of the worker's ``process`` span,
  which holds the engine's parts and the reply's ``send`` span; the reply
  record carries that trace;
* an erasure: its span is the child of the producer's, and its receipt carries
  that trace;
* a session: the session end's producer span is the parent of ``session
  close``, whose record's consolidation ``process`` span holds the run's parts
  and the SQL statements, and links to the producer spans of the session's
  messages;
* an ingest batch links to the producer spans of the records it took;
* attributes follow the messaging conventions; no span of memstream's holds a
  message's text.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

ROOT = Path(__file__).resolve().parents[2]
QUERY_PORT, OTLP_PORT = 16687, 14318
CONTENTS = ["I live in Lisbon and I work as a nurse.",
            "Sounds great, tell me more about your shifts.",
            "I prefer night shifts because the ward is quiet.",
            "Night shifts can be tiring; rest well."]


@pytest.fixture(scope="module")
def jaeger() -> str:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", "jaeger"],
                   check=True, timeout=1800)
    return f"http://127.0.0.1:{QUERY_PORT}"


class _Kept(SpanExporter):
    """The producer's own spans, kept to compare (and sent on to Jaeger)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def traced_producer(service: str) -> tuple[Any, _Kept, TracerProvider]:
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    kept = _Kept()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"http://127.0.0.1:{OTLP_PORT}/v1/traces")))
    producer = ConfluentKafkaInstrumentor().instrument_producer(
        Producer({"bootstrap.servers": KAFKA_BOOTSTRAP, "linger.ms": 5}),
        tracer_provider=provider)
    return producer, kept, provider


def trace_of(jaeger: str, trace_id: str) -> list[dict[str, Any]]:
    """Every span of the trace Jaeger holds, with its service name."""
    r = httpx.get(f"{jaeger}/api/v3/traces/{trace_id}", timeout=10)
    if r.status_code == 404:
        return []
    r.raise_for_status()
    out = []
    for rs in r.json()["result"]["resourceSpans"]:
        service = next(a["value"]["stringValue"] for a in rs["resource"]["attributes"]
                       if a["key"] == "service.name")
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["service"] = service
                s["attrs"] = {a["key"]: next(iter(a["value"].values()))
                              for a in s.get("attributes", [])}
                out.append(s)
    return out


def hex_id(n: int, width: int) -> str:
    return f"{n:0{width}x}"


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [s for s in spans if s["name"] == name]
    assert len(found) == 1, (name, sorted(s["name"] for s in spans))
    return found[0]


@pytest.mark.timeout(1800)  # its fixture may wait for Jaeger's first build
async def test_one_trace_from_the_producer_to_the_reply_and_through_consolidation(
        stack: Stack, jaeger: str) -> None:
    stack.extra_env.update(FAST)
    memstream = f"memstream-{stack.name}"
    stack.worker(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{OTLP_PORT}",
                 OTEL_SERVICE_NAME=memstream, OTEL_BSP_SCHEDULE_DELAY="200").start()
    t = stack.topics
    producer, kept, provider = traced_producer(f"chat-{stack.name}")

    # a session: four messages and its end, each produced in its own trace
    conv = "trace-c1"
    docs = [chat_event(i, conv, content=c) for i, c in enumerate(CONTENTS)]
    docs.append(session_end_event(conv, created_at="2026-11-30T08:00:03.5Z"))
    for d in docs:
        producer.produce(t["chat"], json.dumps(d).encode(), key=conv.encode())
    assert producer.flush(30) == 0
    sends = [s for s in kept.spans if s.name == f"{t['chat']} send" or
             s.name == f"send {t['chat']}"]
    assert len(sends) == len(docs), [s.name for s in kept.spans]
    messages, end = sends[:-1], sends[-1]

    end_trace = hex_id(end.context.trace_id, 32)
    consolidated: list[dict[str, Any]] = []

    def consolidation_exported() -> bool:
        consolidated[:] = trace_of(jaeger, end_trace)
        return {"memory write", f"process {t['closed']}"} <= {s["name"] for s in consolidated}

    await eventually(consolidation_exported, 60, "the consolidation run in the end's trace")
    spans = consolidated
    close = one(spans, "session close")
    assert close["parentSpanId"] == hex_id(end.context.span_id, 16)
    assert close["service"] == memstream
    assert close["attrs"]["memstream.trigger"] == "explicit"
    sent = one(spans, f"send {t['closed']}")
    assert sent["parentSpanId"] == close["spanId"]
    run = one(spans, f"process {t['closed']}")
    assert run["parentSpanId"] == sent["spanId"]
    assert run["kind"] in (5, "SPAN_KIND_CONSUMER")
    assert run["attrs"]["messaging.system"] == "kafka"
    assert run["attrs"]["messaging.destination.name"] == t["closed"]
    assert run["attrs"]["memstream.outcome"] == "done"
    linked = {(link["traceId"], link["spanId"]) for link in run.get("links", [])}
    assert linked == {(hex_id(m.context.trace_id, 32), hex_id(m.context.span_id, 16))
                      for m in messages}
    by_id = {s["spanId"]: s for s in spans}

    def under(s: dict[str, Any], ancestor: dict[str, Any]) -> bool:
        while s.get("parentSpanId"):
            if s["parentSpanId"] == ancestor["spanId"]:
                return True
            s = by_id.get(s["parentSpanId"], {})
        return False

    for part in ("consolidation claim", "consolidation judge", "memory write",
                 "memory cube write"):
        assert under(one(spans, part), run), part
    sql = [s for s in spans if s["attrs"].get("db.system") == "mysql"
           or s["attrs"].get("db.system.name") == "mysql"]
    assert sql and all(under(s, run) or under(s, close) for s in sql)

    # a query, produced in its own trace: answered within it
    reply_topic = f"{stack.name}.replies"
    correlation = uuid.uuid4().bytes
    query = {"request_id": "rq-1", "tenant_id": "t1", "user_id": "u1", "agent_id": "a1",
             "conversation_id": conv, "message": "Where do I live?",
             "options": {"timeout_ms": 5000}}
    producer.produce(t["queries"], json.dumps(query).encode(), key=b"t1/u1", headers=[
        ("kafka_replyTopic", reply_topic.encode()), ("kafka_correlationId", correlation)])
    assert producer.flush(30) == 0
    asked = [s for s in kept.spans if t["queries"] in s.name]
    assert len(asked) == 1
    query_trace = hex_id(asked[0].context.trace_id, 32)
    [reply] = await stack.read_topic(reply_topic, expect=1, timeout=30)
    headers = dict(reply.headers)
    assert headers["traceparent"].decode().split("-")[1] == query_trace
    assert "Lisbon" in reply.value.decode()

    answered: list[dict[str, Any]] = []

    def query_exported() -> bool:
        answered[:] = trace_of(jaeger, query_trace)
        return {f"send {reply_topic}", f"process {t['queries']}"} <= {s["name"] for s in answered}

    await eventually(query_exported, 30, "the query's spans in the producer's trace")
    spans = answered
    by_id = {s["spanId"]: s for s in spans}
    process = one(spans, f"process {t['queries']}")
    assert process["parentSpanId"] == hex_id(asked[0].context.span_id, 16)
    assert process["attrs"]["memstream.tenant_id"] == "t1"
    assert process["attrs"]["memstream.outcome"] == "answered"
    send = one(spans, f"send {reply_topic}")
    assert send["parentSpanId"] == process["spanId"]
    assert headers["traceparent"].decode().split("-")[2] == send["spanId"]
    for part in ("query short_term", "query long_term", "memory search", "query budget"):
        assert under(one(spans, part), process), part

    # an erasure (a dry run): its receipt is in the producer's trace
    erasure = {"erasure_id": "e-trace", "tenant_id": "t1", "target": "user", "user_id": "u1",
               "dry_run": True}
    receipts = f"{stack.name}.erasure-replies"
    producer.produce(t["erasures"], json.dumps(erasure).encode(), key=b"t1/e-trace", headers=[
        ("kafka_replyTopic", receipts.encode()), ("kafka_correlationId", b"e1")])
    assert producer.flush(30) == 0
    [erase_sent] = [s for s in kept.spans if t["erasures"] in s.name]
    erase_trace = hex_id(erase_sent.context.trace_id, 32)
    [receipt] = await stack.read_topic(receipts, expect=1, timeout=30)
    assert dict(receipt.headers)["traceparent"].decode().split("-")[1] == erase_trace
    erased: list[dict[str, Any]] = []

    def erasure_exported() -> bool:
        erased[:] = trace_of(jaeger, erase_trace)
        return any(s["name"] == f"process {t['erasures']}" for s in erased)

    await eventually(erasure_exported, 30, "the erasure's span in the producer's trace")
    handled = one(erased, f"process {t['erasures']}")
    assert handled["parentSpanId"] == hex_id(erase_sent.context.span_id, 16)
    assert handled["attrs"]["memstream.outcome"] == "dry_run"
    assert handled["attrs"]["memstream.tenant_id"] == "t1"

    # every trace memstream exported: the ingest batches link to the records they
    # took; no span holds a message's text, nor the question
    everything = httpx.get(f"{jaeger}/api/traces", params={"service": memstream, "limit": 1000},
                           timeout=10).json()["data"]
    batches = [s for tr in everything for s in tr["spans"] if s["operationName"] == "ingest batch"]
    referenced = {r["spanID"] for s in batches for r in s["references"]}
    assert {hex_id(m.context.span_id, 16) for m in sends} <= referenced
    for tr in everything:
        text = json.dumps(tr)
        assert not any(c[:20] in text for c in CONTENTS)
        assert "Where do I live" not in text
    provider.shutdown()
