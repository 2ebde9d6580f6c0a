"""What an erasure covers (events, sessions, memories), the request's contract and the
fence on the idle topic: table-driven, no event loop."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from streams.adapters.redis.conversation_cache import ConversationCache
from streams.erasure.model import ErasureMark, MemorySource
from streams.erasure.rules.coverage import ErasureIndex, EventPlace, covers
from streams.memory.model import decimal_id
from streams.wire.decode import decode_idle_record
from streams.wire.erasure import ErasureFence, ErasureRequest
from streams.wire.records import IdleCheck
from streams.wire.rejections import Rejected

CUTOFF = datetime(2026, 12, 1, 12, 0, 0)
BEFORE, AFTER = datetime(2026, 12, 1, 11, 0), datetime(2026, 12, 1, 13, 0)


def mark(target: str = "user", subject: str = "u1", tenant: str = "t1", *, seq: int = 1,
         offsets: dict[int, int] | None = None, source: MemorySource | None = None,
         erasure_id: str | None = None) -> ErasureMark:
    return ErasureMark(erasure_id or f"e-{target}-{subject}-{tenant}", tenant, target,  # type: ignore[arg-type]
                       subject, CUTOFF, offsets if offsets is not None else {0: 100, 1: 50},
                       source, seq)


@pytest.mark.parametrize(("created_at", "places", "covered"), [
    (BEFORE, [], True),  # happened before the erasure
    (CUTOFF, [], True),  # at the cutoff
    (AFTER, [], False),  # a later event, from nowhere known: new
    (AFTER, [EventPlace(0, 99)], True),  # published before the erasure, its clock ahead
    (AFTER, [EventPlace(0, 100)], False),  # published after the erasure was recorded
    (AFTER, [EventPlace(1, 10)], True),
    (AFTER, [EventPlace(2, 0)], False),  # a partition the erasure did not see (added later)
    (BEFORE, [EventPlace(0, 5000)], True),  # re-driven long after, older than the cutoff
    # re-driven after the erasure (a new offset), first read before it: covered
    (AFTER, [EventPlace(0, 700), EventPlace(0, 3)], True),
])
def test_an_event_is_covered_by_time_or_by_offset(created_at: datetime,
                                                  places: list[EventPlace],
                                                  covered: bool) -> None:
    assert covers(mark(), created_at, places) is covered


@pytest.mark.parametrize(("marks", "tenant", "user", "conversations", "covered"), [
    ([mark("user", "u1")], "t1", "u1", ("c1",), True),
    ([mark("user", "u1")], "t1", "u2", ("c1",), False),  # another user
    ([mark("user", "u1")], "t2", "u1", ("c1",), False),  # the same user id, another tenant
    ([mark("conversation", "c1")], "t1", "u9", ("c1",), True),  # every speaker of it
    ([mark("conversation", "c1")], "t1", "u1", ("c2",), False),
    ([mark("conversation", "c1")], "t1", "u1", ("agent:x", "c1"), True),  # sub-agent chat
    ([mark("tenant", "t1")], "t1", "anyone", ("any",), True),
    ([mark("tenant", "t1")], "t2", "anyone", ("any",), False),
    ([mark("memory", "42", source=MemorySource("user_profile", "u1", frozenset({"e1"})))],
     "t1", "u1", ("c1",), False),  # a memory erasure covers no event
    ([], "t1", "u1", ("c1",), False),
])
def test_the_index_finds_the_erasure_of_an_event(marks: list[ErasureMark], tenant: str,
                                                 user: str, conversations: tuple[str, ...],
                                                 covered: bool) -> None:
    index = ErasureIndex(marks)
    found = index.event_covered(tenant, user, conversations, BEFORE)
    assert (found is not None) is covered


@pytest.mark.parametrize(("last_activity", "user", "conversation", "covered"), [
    (BEFORE, "u1", "c1", True),
    (AFTER, "u1", "c1", False),  # a session of the user after the erasure: new
    (BEFORE, "u2", "c1", False),
    (BEFORE, "u2", "gone", True),  # the erased conversation, whoever's session
])
def test_a_session_end_is_covered_up_to_the_cutoff(last_activity: datetime, user: str,
                                                   conversation: str, covered: bool) -> None:
    index = ErasureIndex([mark("user", "u1"), mark("conversation", "gone")])
    assert (index.session_covered("t1", user, conversation, last_activity)
            is not None) is covered


SOURCE = MemorySource("user_profile", "u1", frozenset({"e1", "e2"}))


@pytest.mark.parametrize(("cube", "user", "sources", "erased"), [
    ("user_profile", "u1", ("e1",), True),  # judged again from the same messages
    ("user_profile", "u1", ("e1", "e2"), True),
    ("user_profile", "u1", ("e1", "e3"), False),  # a message the erased memory had not
    ("user_profile", "u2", ("e1",), False),
    ("agent_a1", "u1", ("e1",), False),
    ("user_profile", "u1", (), False),  # nothing to tell it by
])
def test_a_candidate_that_would_bring_an_erased_memory_back(cube: str, user: str,
                                                            sources: tuple[str, ...],
                                                            erased: bool) -> None:
    index = ErasureIndex([mark("memory", "42", source=SOURCE)])
    assert (index.erased_memory("t1", cube, user, sources) is not None) is erased


def test_the_index_takes_each_erasure_once_and_follows_the_log() -> None:
    index = ErasureIndex()
    assert index.add(mark(seq=3)) and not index.add(mark(seq=3))
    assert index.add(mark("user", "u2", seq=7)) and len(index) == 2
    assert index.last_seq == 7 and ("t1", "e-user-u1-t1") in index
    # erasure ids are the tenant's own: the same id in another tenant is another erasure
    assert index.add(mark("user", "u1", "t2", seq=8, erasure_id="e-user-u1-t1"))
    assert len(index) == 3


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


@pytest.mark.parametrize(("prefix", "tenant", "pattern"), [
    ("ms", "t1", "ms:{t1:*"),
    ("a*b", "t.1", "a\\*b:{t.1:*"),  # a prefix with glob characters matches itself only
    ("x[1]", "t-1", "x\\[1\\]:{t-1:*"),
])
def test_the_scan_pattern_of_a_tenant_is_literal(prefix: str, tenant: str, pattern: str) -> None:
    assert ConversationCache(None, prefix=prefix).tenant_pattern(tenant) == pattern


@pytest.mark.parametrize(("value", "number"), [
    ("1", 1), ("1234", 1234), (42, 42),
    ("01", None), ("0", None), ("²", None), ("١", None), ("-1", None), ("1 ", None),
    ("", None), ("99999999999999999999", None), ("abc", None),
])
def test_only_ids_memstream_writes_name_a_builtin_memory(value: object,
                                                         number: int | None) -> None:
    assert decimal_id(value) == number
