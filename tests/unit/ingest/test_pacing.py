"""The pacer of chat events: a tenant over its quota held and taken in later, in
order; other tenants never held; bounded; let go at a rebalance. No event loop."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from streams.ingest.pacing import ITEM_BYTES, EventPacer, Item
from streams.quotas.book import DEAD_LETTERED, DELAYED, QuotaBook
from streams.quotas.rules import Bucket, Limit
from streams.wire.envelope import SourceRecord

CHAT = "chat"


def rec(tenant: str | None, i: int, *, topic: str = CHAT, size: int = 0) -> Item[str]:
    doc = {"tenant_id": tenant, "event_id": f"{tenant}-{i}", "content": "x" * size}
    value = json.dumps(doc).encode() if tenant is not None else b"not json"
    return SourceRecord(topic, 0, i, b"k", value), f"{tenant}-{i}"


def pacer(*, rate: float = 2.0, burst: float = 2.0, max_held: int = 100,
          max_bytes: int = 1 << 24, max_tenant_bytes: int = 1 << 24,
          max_wait_s: float = 1000.0, dead_letter: tuple[str, ...] = (),
          free: tuple[str, ...] = ()) -> EventPacer[str]:
    book = QuotaBook("events", Limit(rate, burst),
                     {t: Limit(0.0, 1.0) for t in free}, refused_as=DELAYED,
                     refused_as_for={t: DEAD_LETTERED for t in dead_letter})
    return EventPacer(book, delays=lambda t: book.over_quota(t) == DELAYED
                      and not book.limit(t).unlimited, chat_topic=CHAT,
                      max_wait_s=max_wait_s, max_held=max_held,
                      max_tenant_bytes=max_tenant_bytes, max_bytes=max_bytes)


def handles(items: list[Item[str]]) -> list[str]:
    return [h for _, h in items]


def decisions(tenant: str, decision: str) -> float:
    return REGISTRY.get_sample_value("memstream_quota_decisions_total", {
        "tenant": tenant, "quota": "events", "decision": decision}) or 0.0


# (what is read, in order) -> (taken in at once, held)
@pytest.mark.parametrize(("reads", "ready", "held"), [
    # the burst passes, the rest of the tenant is held
    ([("loud-a", i) for i in range(4)], ["loud-a-0", "loud-a-1"], 2),
    # another tenant, read between, is never held
    ([("loud-b", 0), ("loud-b", 1), ("loud-b", 2), ("calm-b", 0), ("loud-b", 3),
      ("calm-b", 1)], ["loud-b-0", "loud-b-1", "calm-b-0", "calm-b-1"], 2),
    # a tenant without a limit, and one whose events are dead-lettered, pass
    ([("free-c", i) for i in range(5)], [f"free-c-{i}" for i in range(5)], 0),
    ([("dead-c", i) for i in range(5)], [f"dead-c-{i}" for i in range(5)], 0),
    # a record naming no tenant, or not a valid tenant id, passes unweighed
    ([(None, 0), ("loud-d", 0), ("loud-d", 1), ("loud-d", 2)],
     ["None-0", "loud-d-0", "loud-d-1"], 1),
    ([("bad id!", i) for i in range(4)] + [("x" * 65, 0)],
     [f"bad id!-{i}" for i in range(4)] + [f"{'x' * 65}-0"], 0),
])
def test_who_is_held(reads: list[tuple[str | None, int]], ready: list[str], held: int) -> None:
    p = pacer(dead_letter=("dead-c",), free=("free-c",))
    out = p.admit([rec(t, i) for t, i in reads], 0.0)
    assert handles(out.ready) == ready and not out.let_go
    assert p.held == held == len(out.held)


def test_other_topics_are_not_weighed() -> None:
    p = pacer(burst=1.0)
    out = p.admit([rec("loud-e", i, topic="sub") for i in range(5)], 0.0)
    assert len(out.ready) == 5 and p.held == 0


def test_held_records_come_out_in_order_as_the_quota_has_room() -> None:
    p = pacer(rate=2.0, burst=2.0)
    assert handles(p.admit([rec("loud-f", i) for i in range(6)], 0.0).ready) == [
        "loud-f-0", "loud-f-1"]
    assert p.next_in(0.0) == pytest.approx(0.5)
    assert p.due(0.25) == []
    assert handles(p.due(0.5)) == ["loud-f-2"]
    # a later record within the quota waits behind the held ones
    assert p.admit([rec("loud-f", 6)], 5.0).ready == []
    assert handles(p.due(5.0)) == ["loud-f-3", "loud-f-4"]  # the burst refilled: 2
    assert handles(p.due(6.0)) == ["loud-f-5", "loud-f-6"]
    assert p.held == 0 and p.next_in(6.0) is None


def test_tenants_take_turns() -> None:
    p = pacer(rate=1.0, burst=1.0)
    p.admit([rec(t, i) for i in range(3) for t in ("loud-g", "loud-h")], 0.0)
    assert handles(p.due(2.0)) == ["loud-g-1", "loud-h-1"]  # one token each a second
    assert handles(p.due(3.0)) == ["loud-g-2", "loud-h-2"]


def size_of(size: int) -> int:
    return len(rec("loud-i", 9, size=size)[0].value or b"") + ITEM_BYTES


@pytest.mark.parametrize(("bounds", "message"), [
    ({"max_held": 2}, "2 of its events"),                                  # a tenant's count
    ({"max_tenant_bytes": 2 * size_of(100)}, "EVENTS_HELD_TENANT_BYTES"),  # a tenant's bytes
    ({"max_bytes": 2 * size_of(100)}, "bytes of every tenant's"),           # every tenant's
    ({"max_wait_s": 1.0}, "its quota has room for it in 1.5 s"),           # the time held
])
def test_past_the_bounds_a_record_is_taken_in_to_be_dead_lettered(
        bounds: dict[str, float], message: str) -> None:
    p = pacer(**bounds)  # type: ignore[arg-type]
    items = [rec("loud-i", i, size=100) for i in range(6)]
    out = p.admit(items, 0.0)
    refused = ["loud-i-4", "loud-i-5"]
    assert handles(out.ready) == ["loud-i-0", "loud-i-1", *refused]
    assert handles(out.held) == ["loud-i-2", "loud-i-3"]
    weighed = {h: p.weigh(r, "loud-i", 0.0) for r, h in out.ready}
    assert weighed["loud-i-0"] is None and weighed["loud-i-1"] is None
    for h in refused:
        assert "over the events quota of tenant 'loud-i'" in (weighed[h] or "")
        assert message in (weighed[h] or "")
    # room again: the next is held behind the two, not refused
    assert handles(p.due(1.0)) == ["loud-i-2", "loud-i-3"]
    assert handles(p.admit([rec("loud-i", 6, size=100)], 1.0).held) == ["loud-i-6"]


def test_one_tenant_filling_its_bytes_leaves_room_for_another() -> None:
    p = pacer(rate=1.0, burst=1.0, max_tenant_bytes=3 * size_of(100),
              max_bytes=6 * size_of(100))
    p.admit([rec("loud-m", i, size=100) for i in range(10)], 0.0)
    out = p.admit([rec("loud-n", i, size=100) for i in range(3)], 0.0)
    assert handles(out.held) == ["loud-n-1", "loud-n-2"]


def test_weigh() -> None:
    p = pacer(burst=1.0, rate=1.0, dead_letter=("dead-j",))
    # a delaying tenant's record was weighed as it was read: stored unless refused
    assert p.weigh(rec("loud-j", 0)[0], "loud-j", 0.0) is None
    # a dead-lettering tenant's is weighed here
    assert p.weigh(rec("dead-j", 0)[0], "dead-j", 0.0) is None  # the burst
    assert "retry in" in (p.weigh(rec("dead-j", 1)[0], "dead-j", 0.0) or "")


def test_release_lets_go_of_what_is_held_and_what_follows_until_resumed() -> None:
    p = pacer(rate=1.0, burst=1.0)
    p.admit([rec("loud-k", i) for i in range(3)], 0.0)
    assert handles(p.release()) == ["loud-k-1", "loud-k-2"]
    assert p.held == 0 and p.due(100.0) == []
    out = p.admit([rec("loud-k", 3), rec("calm-k", 0)], 100.0)
    assert handles(out.let_go) == ["loud-k-3"] and handles(out.ready) == ["calm-k-0"]
    p.resume()
    assert handles(p.admit([rec("loud-k", 1)], 100.0).ready) == ["loud-k-1"]  # read again


def test_decisions_are_counted_per_tenant() -> None:
    p = pacer(rate=1.0, burst=1.0, max_held=2)
    p.admit([rec("loud-l", i) for i in range(5)], 0.0)
    p.due(1.0)
    assert (decisions("loud-l", "allowed"), decisions("loud-l", DELAYED),
            decisions("loud-l", DEAD_LETTERED)) == (2, 2, 2)
    tally = p.quota.tally("loud-l", 1.0)
    assert (tally.allowed, tally.delayed, tally.refused) == (2, 2, 2)
    assert p.quota.view("loud-l", 1.0)["over_quota"] == DELAYED


@pytest.mark.timeout(10)
@pytest.mark.parametrize("rate", [10.0, 1000.0])
def test_a_refusal_by_less_than_a_clock_tick_never_comes_round_at_once(rate: float) -> None:
    t0 = 1_750_000_000.0  # a real clock's seconds: a tick of 2.4e-7 s
    p = pacer(rate=rate, burst=1.0)
    p.admit([rec("loud-o", i) for i in range(5)], t0)
    now = t0 + 10.0 / rate
    # the bucket a hair under one token (what refills in floats give)
    p.quota._tenants["loud-o"].bucket = Bucket(1.0 - 5e-8 * rate, now)
    p._turns = [(now, 99, "loud-o")]
    assert now + p.quota.peek("loud-o", now).retry_after_s == now
    assert p.due(now) == []  # returns: the tenant's next turn is later
    assert (p.next_in(now) or 0.0) > 0


def test_every_refusal_is_kept_until_weighed_whatever_the_hold() -> None:
    p = pacer(rate=1.0, burst=1.0, max_held=10)
    out = p.admit([rec("loud-p", i) for i in range(100)], 0.0)
    assert len(out.held) == 10 and len(out.ready) == 90
    verdicts = [p.weigh(r, "loud-p", 0.0) for r, _ in out.ready]
    assert verdicts[0] is None and all(v is not None for v in verdicts[1:])  # 89 refused
