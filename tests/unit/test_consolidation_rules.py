"""Pure rules of the consolidation pipeline: message identity, failure classes,
retry headers and backoff, episodes, judge parts, adoption, agent-config lookup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from streams.adapters.db.ledger import SessionMessage, message_hash
from streams.adapters.db.runs import CandidateRow, candidate_hash
from streams.adapters.http.client import (
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderTimeout,
)
from streams.adapters.kafka.replay import ReplayFilter, redrive_headers, replay_group, skip_reason
from streams.consolidation.failures import FailureRouter, attempt_of, classify, due_at
from streams.consolidation.judge import MemoryJudge
from streams.consolidation.pipeline import episodes_of
from streams.consolidation.summarizer import clip_lines
from streams.consolidation.writer import same_memory
from streams.memory.agent_configs import StaticAgentConfigs, TableAgentConfigs
from streams.memory.cube_locks import CubeLockLost, CubeLockTimeout
from streams.memory.model import MemoryCandidate, SourceMessage, StoredMemory
from streams.memory.registry import ModelFactory, ProviderNotConfigured, ProviderRegistry
from streams.wire.envelope import SourceRecord
from streams.wire.headers import ATTEMPT, NEXT_ATTEMPT_AT, header

T = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_a_message_is_its_text_speaker_and_time_in_its_conversation() -> None:
    base = message_hash("t1", "c1", "user", None, "yes", T)
    assert base == message_hash("t1", "c1", "user", None, "yes", T.replace(tzinfo=None))
    others = [
        message_hash("t2", "c1", "user", None, "yes", T),
        message_hash("t1", "c2", "user", None, "yes", T),
        message_hash("t1", "c1", "assistant", None, "yes", T),
        message_hash("t1", "c1", "user", "Ann", "yes", T),
        message_hash("t1", "c1", "user", None, "yes", T + timedelta(seconds=1)),
        message_hash("t1", "c1", "user", None, "yes!", T),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_candidate_hash_separates_cubes_kinds_and_sources() -> None:
    c = MemoryCandidate("I live in Rome.", source_event_ids=("e1",))
    assert candidate_hash("user_profile", c) != candidate_hash("agent_a", c)
    assert candidate_hash("user_profile", c) != candidate_hash(
        "user_profile", MemoryCandidate("I live in Rome.", source_event_ids=("e2",)))
    assert candidate_hash("user_profile", c) != candidate_hash(
        "user_profile", MemoryCandidate("I live in Rome.", source_event_ids=("e1",),
                                        kind="episode"))


@pytest.mark.parametrize(("exc", "kind", "reason"), [
    (OperationalError("x", {}, Exception("gone")), "infrastructure", "database_unavailable"),
    (ConnectionRefusedError(), "infrastructure", "database_unavailable"),
    (ProviderTimeout("t"), "retry", "provider_timeout"),
    (ProviderRateLimited("r"), "retry", "provider_rate_limited"),
    (ProviderRequestRejected("bad"), "dead", "provider_rejected"),
    (ProviderNotConfigured("memos"), "dead", "provider_not_configured"),
    (IntegrityError("x", {}, Exception("dup")), "retry", "internal_error"),
    (ValueError("bug"), "retry", "internal_error"),
    (CubeLockTimeout("busy"), "infrastructure", "cube_lock_timeout"),
    (CubeLockLost("gone"), "infrastructure", "cube_lock_lost"),
])
def test_failures_are_classified(exc: Exception, kind: str, reason: str) -> None:
    f = classify(exc)
    assert (f.kind, f.reason) == (kind, reason)


def _router(rng: float = 1.0) -> FailureRouter:
    return FailureRouter(source_topic="closed", retry_topic="retry", dlq_topic="dlq",
                       max_attempts=4, initial_s=10.0, max_s=30.0, clock=lambda: 1000.0,
                       rng=lambda: rng)


def test_backoff_doubles_is_capped_and_jittered_in_the_upper_half() -> None:
    r = _router()
    assert [r.delay(n) for n in (1, 2, 3, 4)] == [10.0, 20.0, 30.0, 30.0]
    assert _router(0.0).delay(2) == 10.0


def test_retry_records_keep_key_value_and_foreign_headers() -> None:
    rec = SourceRecord("closed", 3, 17, b"c1", b"{}", [("traceparent", b"00-ab")])
    out = _router().route(rec, classify(ProviderTimeout("slow")))
    assert (out.topic, out.key, out.value) == ("retry", b"c1", b"{}")
    assert header(out.headers, "traceparent") == b"00-ab"
    again = SourceRecord("retry", 0, 5, out.key, out.value, out.headers)
    assert attempt_of(again) == 2 and due_at(again) == 1010.0
    out2 = _router().route(again, classify(ProviderTimeout("slow")))
    assert [k for k, _ in out2.headers].count(ATTEMPT) == 1
    assert header(out2.headers, ATTEMPT) == b"3"
    assert header(out2.headers, "memstream.origin.offset") == b"17"


def test_the_last_attempt_is_dead_lettered_as_from_the_source_topic() -> None:
    rec = SourceRecord("retry", 1, 9, b"c1", b"{}", [
        (ATTEMPT, b"4"), (NEXT_ATTEMPT_AT, b"x"), ("memstream.origin.partition", b"2"),
        ("memstream.origin.offset", b"17")])
    out = _router().route(rec, classify(ProviderTimeout("slow")))
    assert out.topic == "dlq"
    assert header(out.headers, "memstream.source.topic") == b"closed"
    assert header(out.headers, "memstream.source.partition") == b"2"
    assert header(out.headers, "memstream.source.offset") == b"17"
    assert header(out.headers, NEXT_ATTEMPT_AT) is None


def test_missing_or_bad_retry_headers_mean_now_and_first_attempt() -> None:
    rec = SourceRecord("retry", 0, 0, None, None, [(ATTEMPT, b"x"), (NEXT_ATTEMPT_AT, b"?")])
    assert attempt_of(rec) == 1 and due_at(rec) == 0.0


def test_episodes_are_the_chat_messages_with_their_speaker_time_and_id() -> None:
    msgs = [SessionMessage(1, "e1", "user", "I went to Rome.", T),
            SessionMessage(2, "e2", "tool", "{}", T),
            SessionMessage(3, "e3", "assistant", "  ", T),
            SessionMessage(4, "e4", "assistant", "x" * 300, T, name="Bot")]
    eps = episodes_of(msgs, max_chars=100)
    assert [e.candidate.content[:20] for e in eps] == ["User: I went to Rome",
                                                       "Bot: xxxxxxxxxxxxxxx"]
    assert all(e.episode and e.cube == "user_profile" for e in eps)
    assert eps[0].candidate.source_event_ids == ("e1",) and eps[0].candidate.event_time == T
    assert eps[0].candidate.kind == "episode" and len(eps[1].candidate.content) <= 100


def test_a_long_session_is_judged_in_parts_that_fit_the_budget() -> None:
    judge = MemoryJudge(count_tokens=lambda s: len(s.split()), max_input_tokens=700)
    new = [SourceMessage(f"e{i}", "user", "word " * 100, T) for i in range(10)]
    context = [SourceMessage("c0", "user", "context", T, new=False)]
    parts = judge.parts(context, new)
    assert len(parts) > 1
    assert [m.event_id for p in parts for m in p if m.new] == [f"e{i}" for i in range(10)]
    assert parts[0][0].event_id == "c0"
    # a later part shows the tail of the part before it as (old) context
    old = [m.event_id for m in parts[1] if not m.new]
    assert old and old == [m.event_id for m in parts[0] if m.new][-len(old):]
    assert MemoryJudge(count_tokens=lambda s: 1).parts(context, new[:2]) == [context + new[:2]]


def test_clip_lines_never_cuts_inside_a_line() -> None:
    text = "aaa bbb\nccc\nddd eee fff"
    assert clip_lines(text, 5, lambda s: len(s.split())) == "aaa bbb\nccc"
    assert clip_lines(text, 1, lambda s: len(s.split())) == ""


def test_adoption_needs_the_same_text_and_sources() -> None:
    row = CandidateRow(0, "user_profile",
                       MemoryCandidate("I live in Rome.", source_event_ids=("e1",)))
    same = StoredMemory("m1", "i live in rome", "user_profile", source_event_ids=("e1",))
    assert same_memory(row, same)
    assert same_memory(row, StoredMemory("m2", "I live in Rome.", "user_profile"))
    assert not same_memory(row, StoredMemory("m3", "I live in Rome.", "user_profile",
                                             source_event_ids=("e9",)))
    assert not same_memory(row, StoredMemory("m4", "I live in Oslo.", "user_profile"))


def test_agent_configs_from_the_table_whatever_the_key_type() -> None:
    raw = b'{"long_memory_provider": "mem0", "open_long_memory": true, "model": "m"}'
    for key in (b"t1/a1", "t1/a1"):
        cfg = TableAgentConfigs({key: raw}).get("t1", "a1")
        assert cfg is not None and cfg.long_memory_provider == "MEM0" and cfg.open_long_memory
    assert TableAgentConfigs({b"t1/a1": b"{not json"}).get("t1", "a1") is None
    assert TableAgentConfigs({}).get("t1", "a1") is None
    assert TableAgentConfigs({}).get("bad/tenant", "a1") is None
    assert StaticAgentConfigs({("t1", "a1"): {"openLongMemory": True}}).get("t1", "a1") is not None


def test_models_and_providers_are_never_substituted() -> None:
    built: list[str] = []

    def build(name: str) -> object:
        built.append(name)
        return object()

    assert ModelFactory(None, None).for_agent("m") is None
    f = ModelFactory(build, "default")  # type: ignore[arg-type]
    assert f.for_agent("agent-model") is f.for_agent(None) and built == ["default"]
    g = ModelFactory(build, "default", use_agent_model=True)  # type: ignore[arg-type]
    g.for_agent("agent-model")
    assert built == ["default", "agent-model"]
    with pytest.raises(ProviderNotConfigured):
        ProviderRegistry({}).get("memos")


def test_replay_selects_by_source_tenant_and_time_and_drops_own_headers() -> None:
    since = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    base = [("memstream.source.topic", b"chat.messages"), ("traceparent", b"00-ab"),
            ("memstream.failed_at", b"2026-11-30T09:30:00+00:00")]
    value = b'{"tenant_id": "t1", "event_id": "e1"}'
    assert skip_reason(base, value, ReplayFilter()) is None
    assert skip_reason(base, value, ReplayFilter(tenant_id="t1", since=since)) is None
    assert skip_reason(base, value, ReplayFilter(tenant_id="t2")) == "other_tenant"
    assert skip_reason(base, b"\xff not json", ReplayFilter(tenant_id="t1")) == "other_tenant"
    assert skip_reason(base[1:], value, ReplayFilter()) == "no_source_topic"
    later = ReplayFilter(since=since + timedelta(hours=1))
    assert skip_reason(base, value, later) == "before_since"
    out = redrive_headers(base, "memory.dlq/3/17")
    assert out == [("traceparent", b"00-ab"), ("memstream.replayed_from", b"memory.dlq/3/17")]
    # where it was first read goes along (an erasure covers it by that offset), and
    # stays the first place when the record is dead-lettered and re-driven again
    placed = [*base, ("memstream.source.partition", b"2"), ("memstream.source.offset", b"41")]
    first = [("memstream.first.topic", b"chat.messages"), ("memstream.first.partition", b"2"),
             ("memstream.first.offset", b"41")]
    assert redrive_headers(placed, "memory.dlq/3/17")[1:4] == first
    again = [*first, ("memstream.source.topic", b"chat.messages"),
             ("memstream.source.partition", b"0"), ("memstream.source.offset", b"900")]
    assert redrive_headers(again, "memory.dlq/1/2")[:3] == first
    assert replay_group("memstream", None) == "memstream-replay"
    assert replay_group("memstream", "t1") == "memstream-replay.t1"
