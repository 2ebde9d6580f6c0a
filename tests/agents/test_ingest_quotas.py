"""Chat events a second per tenant into ingest: a loud tenant's events over its
quota are dead-lettered (reason ``over_quota``, the tenant's ``events_over_quota``
being ``dead_letter``) while a calm tenant's events on the same partition, in
the same batches, are all stored at once; the loud tenant's stored events keep
their order, none is stored twice, and every decision is counted by tenant."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import REGISTRY

from streams.ingest.pacing import EventPacer
from streams.ingest.processor import IngestProcessor
from streams.session.stale import StaleHistories
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from streams.wire.envelope import SourceRecord
from streams.wire.headers import header
from tests.support.wiring import ingest_processor, settings_for_tests

NOW = 1_796_026_000.0  # just after the events


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def ev(tenant: str, i: int, conv: str) -> dict[str, Any]:
    return {"event_id": f"{conv}-{i}", "type": "message", "tenant_id": tenant, "user_id": "u",
            "agent_id": "a", "conversation_id": conv, "role": "user", "content": f"m{i}",
            "created_at": "2026-11-30T08:00:00Z"}


def interleaved(start: int, n: int, loud: str, calm: str) -> list[SourceRecord]:
    """``n`` events of each tenant, alternating, on one partition of the chat topic."""
    out = []
    for i in range(start, start + n):
        for tenant, conv in ((loud, f"{loud}-c"), (calm, f"{calm}-c")):
            out.append(SourceRecord("chat", 0, 2 * i + (tenant == calm), conv.encode(),
                                    json.dumps(ev(tenant, i, conv)).encode()))
    return out


def decisions(tenant: str, decision: str) -> float:
    return REGISTRY.get_sample_value("memstream_quota_decisions_total", {
        "tenant": tenant, "quota": "events", "decision": decision}) or 0.0


def build(clock: Clock, **overrides: Any) -> tuple[InMemoryMessageStore, RecordingPublisher,
                                                   IngestProcessor]:
    store, cache, pub = InMemoryMessageStore(), InMemoryHotCopy(), RecordingPublisher()
    overrides = {t: {"events_over_quota": "dead_letter", **o} for t, o in overrides.items()}
    settings = settings_for_tests(quotas={"tenant_overrides": overrides},
                                  ingest={"state_flush_interval_s": 0.0})
    proc = ingest_processor(store, cache, pub, InMemorySessionTable(),
                            stale=StaleHistories(cache, InMemoryStaleMarks()),
                            settings=settings, clock=clock)
    return store, pub, proc


def stored(store: InMemoryMessageStore, tenant: str) -> list[str]:
    return [r["event_id"] for r in store.rows if r["tenant_id"] == tenant]


async def test_a_loud_tenant_over_quota_is_dead_lettered_and_a_calm_one_stored() -> None:
    clock = Clock()
    store, pub, proc = build(clock, **{"loud-1": {"events_per_s": 2, "events_burst": 3}})
    res = await proc.process(interleaved(0, 10, "loud-1", "calm-1"))
    assert stored(store, "calm-1") == [f"calm-1-c-{i}" for i in range(10)]
    assert stored(store, "loud-1") == [f"loud-1-c-{i}" for i in range(3)]  # the burst
    assert (res.stored, res.dead_lettered) == (13, 7)
    dead = pub.on("dlq")
    assert [json.loads(d.value)["event_id"] for d in dead] == [f"loud-1-c-{i}"
                                                                for i in range(3, 10)]
    assert header(dead[0].headers, "memstream.error.reason") == b"over_quota"
    assert header(dead[0].headers, "memstream.error.class") == b"OverQuota"
    assert header(dead[0].headers, "memstream.error.message") == (
        b"over the events quota of tenant 'loud-1' (2 a second, 3 at once): retry in 0.500 s")

    clock.now += 1.0  # two more come back
    await proc.process(interleaved(10, 3, "loud-1", "calm-1"))
    assert stored(store, "loud-1") == [f"loud-1-c-{i}" for i in (0, 1, 2, 10, 11)]
    assert len(stored(store, "calm-1")) == 13
    assert (decisions("loud-1", "allowed"), decisions("loud-1", "dead_lettered")) == (5, 8)
    assert (decisions("calm-1", "allowed"), decisions("calm-1", "dead_lettered")) == (13, 0)
    assert isinstance(proc.quota, EventPacer)
    tally = proc.quota.quota.tally("loud-1", clock())
    assert (tally.allowed, tally.refused, tally.delayed) == (5, 8, 0)


async def test_a_batch_read_again_stores_nothing_twice() -> None:
    clock = Clock()
    store, pub, proc = build(clock, **{"loud-2": {"events_per_s": 1, "events_burst": 2}})
    batch = interleaved(0, 4, "loud-2", "calm-2")
    await proc.process(batch)
    clock.now += 10.0
    await proc.process(batch)  # weighed again: the stored ones take the room back
    clock.now += 1.0
    await proc.process(interleaved(2, 2, "loud-2", "calm-2")[::2])  # re-driven later
    ids = [r["event_id"] for r in store.rows]
    assert len(ids) == len(set(ids)) == 7
    assert stored(store, "loud-2") == ["loud-2-c-0", "loud-2-c-1", "loud-2-c-2"]
    assert len(stored(store, "calm-2")) == 4
    assert decisions("loud-2", "allowed") == 5  # each read of an event counts


async def test_an_event_counts_once_where_first_read() -> None:
    clock = Clock()
    store, pub, proc = build(clock, **{"loud-3": {"events_per_s": 1, "events_burst": 1}})
    sub = {**ev("loud-3", 0, "agent:p:search"), "parent_conversation_id": "p",
           "role": "assistant"}
    res = await proc.process([SourceRecord("chat", 0, 0, b"agent:p:search",
                                           json.dumps(sub).encode())])
    assert res.rerouted == 1
    (out,) = pub.on("sub")
    # the re-keyed copy is stored though the tenant's quota is spent
    res = await proc.process([SourceRecord("sub", 0, 0, out.key, out.value)])
    assert res.stored == 1
    assert decisions("loud-3", "allowed") == 1 and decisions("loud-3", "dead_lettered") == 0

