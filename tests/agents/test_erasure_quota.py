"""The erasures quota (a minute, per tenant) on the real erasure processor over
SQLite: a new request over its tenant's quota is refused visibly (receipt
``rejected`` with ``over_quota``, or a dead letter ``erasure_over_quota`` without a
reply topic) and nothing is erased or recorded; an erasure begun already is never
refused; a tenant's override applies; every decision is counted."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.metrics import QUOTA_DECISIONS
from streams.wire.envelope import DeadLettered, SourceRecord, ToSend
from streams.wire.erasure import ErasureReceipt
from streams.wire.spring_reply import request_headers
from streams.worker.quotas import process_quotas
from tests.agents.test_erasure_sqlite import Setup, request
from tests.support.wiring import settings_for_tests

QUOTAS = {"erasures_per_min": 1, "erasures_burst": 1,
          "tenant_overrides": {"t2": {"erasures_per_min": 0}}}


def quota_setup(engine: AsyncEngine) -> Setup:
    s = Setup(engine)
    s.wiring.quotas = process_quotas(settings_for_tests(quotas=QUOTAS))
    s.processor = s.wiring.erasure_processor(s.offsets, 1)
    s.executor = s.processor.executor
    return s


def record(req: Any, *, reply: bool = True) -> SourceRecord:
    headers = request_headers("svc.replies", b"cid-1", 0) if reply else []
    return SourceRecord("erasures", 0, 0, req.key(), req.model_dump_json().encode(), headers)


def receipt_of(handled: Any) -> ErasureReceipt:
    assert isinstance(handled, ToSend), handled
    [sent] = handled.records
    return ErasureReceipt.model_validate_json(sent.value or b"")


def refused(tenant: str) -> float:
    return QUOTA_DECISIONS.labels(tenant, "erasures", "refused")._value.get()


async def test_a_new_erasure_over_its_tenants_quota_is_refused_and_nothing_goes(
        engine: AsyncEngine) -> None:
    s = quota_setup(engine)
    await s.said()
    before = refused("t1")
    first = receipt_of(await s.processor.handle(record(request(target="user", user_id="u1"))))
    assert first.status == "done"

    over = await s.processor.handle(record(request(target="user", user_id="u2",
                                                   erasure_id="e-2")))
    receipt = receipt_of(over)
    assert receipt.status == "rejected" and receipt.error is not None
    assert receipt.error.code == "over_quota" and "retry in" in receipt.error.message
    assert over.outcome == "rejected"
    assert (await s.rows_of("u2", "c2"))["conversation_message"] == 4  # nothing erased
    assert await s.registry.log.get("t1", "e-2") is None  # nor recorded
    assert "I live in Lisbon." in await s.search("u2", "where do I live")

    # the erasure begun already is repeated, never refused
    again = receipt_of(await s.processor.handle(record(request(target="user", user_id="u1"))))
    assert again.status == "done"
    # without a reply topic: a dead letter says why
    dead = await s.processor.handle(record(request(target="user", user_id="u2",
                                                   erasure_id="e-3"), reply=False))
    assert isinstance(dead, DeadLettered) and dead.reason == "erasure_over_quota"
    assert refused("t1") - before == 2
    allowed, refusals = (s.wiring.quotas.erasures.tally("t1", 0.0).allowed,
                         s.wiring.quotas.erasures.tally("t1", 0.0).refused)
    assert (allowed, refusals) == (1, 2)


async def test_a_tenants_override_lifts_its_quota(engine: AsyncEngine) -> None:
    s = quota_setup(engine)
    for n in range(3):
        handled = await s.processor.handle(record(request(
            tenant_id="t2", target="user", user_id=f"u{n}", erasure_id=f"e-{n}")))
        assert receipt_of(handled).status == "done"
    view = s.wiring.quotas.erasures.view("t2", 0.0)
    assert view["limited"] is False and view["allowed"] == 3 and view["per_s"] == 60.0
