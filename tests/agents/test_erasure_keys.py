"""The key of an erasure request on the compacted ``memory.erasures`` topic must be
the ``{tenant_id}/{erasure_id}`` its body gives: a record keyed like another request
(or another tenant's) is refused (receipt ``rejected``, ``bad_request``; a dead
letter ``erasure_bad_request`` without a reply topic), nothing is erased or
recorded, and the refusal is counted."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.metrics import ERASURE_KEY_MISMATCHES
from streams.wire.envelope import DeadLettered, SourceRecord
from streams.wire.spring_reply import request_headers
from tests.agents.test_erasure_quota import receipt_of
from tests.agents.test_erasure_sqlite import Setup, request


def mismatches() -> float:
    return ERASURE_KEY_MISMATCHES._value.get()


@pytest.mark.parametrize("key", [b"t1/e-0", b"t2/e-1", b"t1/e-1 ", None],
                         ids=["another-erasure", "another-tenant", "trailing-space", "no-key"])
async def test_a_request_keyed_unlike_its_body_is_refused_and_nothing_goes(
        engine: AsyncEngine, key: bytes | None) -> None:
    s = Setup(engine)
    await s.said()
    before = mismatches()
    req = request(target="user", user_id="u1", erasure_id="e-1")
    rec = SourceRecord("erasures", 0, 0, key, req.model_dump_json().encode(),
                       request_headers("svc.replies", b"cid-1", 0))
    handled = await s.processor.handle(rec)
    receipt = receipt_of(handled)
    assert handled.outcome == "rejected" and receipt.status == "rejected"
    assert receipt.error is not None and receipt.error.code == "bad_request"
    assert "'t1/e-1'" in receipt.error.message
    assert (await s.rows_of("u1", "c1"))["conversation_message"] == 4  # nothing erased
    assert await s.registry.log.get("t1", "e-1") is None  # nor recorded
    assert "I live in Oslo." in await s.search("u1", "where do I live")

    unanswered = await s.processor.handle(SourceRecord(
        "erasures", 0, 1, key, req.model_dump_json().encode(), []))
    assert isinstance(unanswered, DeadLettered)
    assert unanswered.reason == "erasure_bad_request"
    assert await s.registry.log.get("t1", "e-1") is None
    assert mismatches() - before == 2

    # keyed as its body gives, the same request is carried out
    done = receipt_of(await s.processor.handle(SourceRecord(
        "erasures", 0, 2, req.key(), req.model_dump_json().encode(),
        request_headers("svc.replies", b"cid-2", 0))))
    assert done.status == "done"
    assert "conversation_message" not in await s.rows_of("u1", "c1")
