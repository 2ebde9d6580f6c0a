"""The erasure request's contract and the fence on the idle topic."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streams.wire.decode import decode_idle_record
from streams.wire.erasure import ErasureFence, ErasureRequest
from streams.wire.records import IdleCheck
from streams.wire.rejections import Rejected


@pytest.mark.parametrize(("doc", "problem"), [
    ({"target": "user", "user_id": "u1"}, None),
    ({"target": "user"}, "needs user_id"),
    ({"target": "user", "user_id": "u1", "conversation_id": "c1"}, "takes no conversation_id"),
    ({"target": "conversation", "conversation_id": "c1"}, None),
    ({"target": "memory", "memory_id": "42", "provider": "MEMOS"}, None),
    ({"target": "memory", "memory_id": "42", "provider": "OTHER"}, "provider"),
    ({"target": "user", "user_id": "u1", "provider": "MEMOS"}, "only for target 'memory'"),
    ({"target": "tenant"}, None),
    ({"target": "tenant", "user_id": "u1"}, "takes no user_id"),
    ({"target": "everything"}, "target"),
    ({"target": "user", "user_id": "u1", "erasure_id": "bad id!"}, "erasure_id"),
    ({"target": "user", "user_id": "u1", "tenant_id": "a/b"}, "tenant_id"),
    # a misspelt switch is refused, never taken for a real erasure
    ({"target": "tenant", "dryRun": True}, "Extra inputs are not permitted"),
    ({"target": "user", "user_id": "u1", "dry-run": True}, "Extra inputs are not permitted"),
])
def test_the_request_names_exactly_its_subject(doc: dict[str, object],
                                               problem: str | None) -> None:
    full = {"erasure_id": "e-1", "tenant_id": "t1", **doc}
    if problem is None:
        req = ErasureRequest.model_validate(full)
        assert req.key() == b"t1/e-1"  # compaction replaces a request by itself only
    else:
        with pytest.raises(ValidationError, match=problem):
            ErasureRequest.model_validate(full)


def test_the_idle_topic_carries_idle_checks_and_fences() -> None:
    check = decode_idle_record(b'{"tenant_id": "t1", "conversation_id": "c1", "session_seq": 1,'
                               b' "idle_for_s": 5, "checked_at": "2026-12-01T00:00:00Z"}')
    assert isinstance(check, IdleCheck)
    fence = decode_idle_record(
        b'{"type": "erasure_fence", "seq": 3, "erasure_id": "e-1", "tenant_id": "t1",'
        b' "target": "user", "subject": "u1", "cutoff": "2026-12-01T00:00:00Z",'
        b' "chat_offsets": {"0": 4}, "partition": 0, "issued_at": "2026-12-01T00:00:00Z"}')
    assert isinstance(fence, ErasureFence) and fence.chat_offsets == {0: 4}
    assert isinstance(decode_idle_record(b'{"type": "erasure_fence"}'), Rejected)
    assert isinstance(decode_idle_record(b"not json"), Rejected)
