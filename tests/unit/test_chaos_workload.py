"""The chaos workload: deterministic, well-formed, and built so that two correct
runs consolidate it to the same memories whatever the order of concurrent sessions."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import datetime

import pytest

from streams.consolidation.rules.conflicts import subject_slot
from streams.consolidation.rules.rule_judge import rule_judge
from streams.consolidation.rules.subjects import subject_keys
from streams.memory.model import MemoryCandidate, SourceMessage
from streams.memory.rules.lexical import query_terms, tokenize
from streams.wire.decode import Rejected, decode_chat_event
from streams.wire.records import ChatMessage, SessionEnd
from tests.chaos import vocabulary as V
from tests.chaos.config import ChaosConfig, WorkloadSpec
from tests.chaos.poison import CHAT, INTERNAL
from tests.chaos.workload import Message, Workload, build_workload

SMALL = WorkloadSpec(seed=11, conversations=60, users=20, tenants=2, active=10, linked_pairs=4)
SPECS = [SMALL, replace(SMALL, seed=12), WorkloadSpec()]
TOP_K = 5  # MEMSTREAM_CONSOLIDATION__CONFLICT_TOP_K


def docs_of(w: Workload) -> dict[str, list[tuple[Message, ChatMessage]]]:
    """Conversation id -> its messages as decoded by memstream, in produce order."""
    out: dict[str, list[tuple[Message, ChatMessage]]] = defaultdict(list)
    by_id = {m.event_id: m for m in w.messages}
    poison = {p.value for p in w.poison}
    for r in w.records:
        if r.topic != "chat" or r.value in poison:
            continue
        ev = decode_chat_event(r.value, 65_536)
        if isinstance(ev, ChatMessage) and ev.event_id in by_id:
            out[ev.conversation_id].append((by_id[ev.event_id], ev))
    return out


def judged(w: Workload) -> dict[tuple[str, int], list[MemoryCandidate]]:
    """(conversation, session) -> the rule judge's candidates for the session."""
    out: dict[tuple[str, int], list[MemoryCandidate]] = defaultdict(list)
    for conv, items in docs_of(w).items():
        by_session: dict[int, list[SourceMessage]] = defaultdict(list)
        for m, ev in items:
            by_session[m.session].append(SourceMessage(ev.event_id, ev.role, ev.content,
                                                       ev.created_at))
        for s, msgs in by_session.items():
            out[(conv, s)] = rule_judge(msgs)
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_the_same_seed_gives_the_same_bytes(spec: WorkloadSpec) -> None:
    a, b = build_workload(spec), build_workload(spec)
    assert [(r.topic, r.key, r.value) for r in a.records] == [
        (r.topic, r.key, r.value) for r in b.records]
    other = build_workload(replace(spec, seed=spec.seed + 1))
    assert [r.value for r in other.records] != [r.value for r in a.records]


@pytest.mark.parametrize("spec", SPECS)
def test_every_good_event_is_valid_and_every_session_ends_after_its_messages(
    spec: WorkloadSpec,
) -> None:
    w = build_workload(spec)
    poison = {p.value for p in w.poison}
    seen: dict[str, list[ChatMessage | SessionEnd]] = defaultdict(list)
    for r in w.records:
        if r.value in poison:
            continue
        assert r.topic == "chat"
        ev = decode_chat_event(r.value, 65_536)
        assert not isinstance(ev, Rejected), (r.value, ev)
        assert r.key == ev.conversation_id.encode()
        seen[ev.conversation_id].append(ev)
    sessions = {s.closed_id: s for s in w.sessions}
    assert len(sessions) == len(w.sessions)
    for conv, events in seen.items():
        times = [e.created_at for e in events]
        assert times == sorted(times) and len(set(times)) == len(times)
        tenant = events[0].tenant_id
        seq, current = 1, []
        for e in events:
            if isinstance(e, SessionEnd):
                assert sessions[f"{tenant}/{conv}#{seq}"].event_ids == tuple(current)
                seq, current = seq + 1, []
            else:
                current.append(e.event_id)
        assert current == [] and 2 <= seq <= spec.max_sessions + 1
    assert sum(len(s.event_ids) for s in w.sessions) == len(w.messages)
    assert len({(m.conversation.tenant, m.event_id) for m in w.messages}) == len(w.messages)
    assert len(seen) == spec.conversations + spec.group_chats
    for m in w.messages:
        assert json.loads(w.records[m.position].value)["event_id"] == m.event_id


@pytest.mark.parametrize("spec", SPECS)
def test_poison_of_every_kind_once_with_unique_bytes(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    assert Counter(p.name for p in w.poison) == Counter(
        [*CHAT, *(f"{t}_garbage" for t in INTERNAL)])
    assert len({p.value for p in w.poison}) == len(w.poison)
    for p in w.poison:
        assert (w.records[p.position].topic, w.records[p.position].value) == (p.topic, p.value)
    assert not build_workload(replace(spec, poison=False)).poison


def test_the_poison_is_what_it_says() -> None:
    w = build_workload(SMALL)
    value = {p.name: p.value for p in w.poison}
    assert json.loads(value["lone_surrogate"])["content"] == "x\ud800"
    assert value["nested_1200"].startswith(b"[" * 1200)
    with pytest.raises(UnicodeDecodeError):
        value["not_utf8"].decode()
    assert json.loads(value["year_9999"])["created_at"] == "9999-12-31T23:59:59-01:00"
    calls = json.loads(value["tool_calls_64k"])["tool_calls"]
    assert len(json.dumps(calls)) > 65_536
    assert "tenant_id" not in json.loads(value["missing_tenant"])


@pytest.mark.parametrize("spec", SPECS)
def test_linked_sessions_end_side_by_side_stating_the_same_fact(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    assert len(w.linked) == spec.linked_pairs
    ends = [i for i, r in enumerate(w.records)
            if r.topic == "chat" and b'"type":"session_end"' in r.value]
    position = {json.loads(w.records[i].value)["event_id"]: i for i in ends}
    said = {(m.conversation.id, m.session): m.content for m in w.messages if m.role == "user"
            and m.content.startswith("I work at")}
    for a, b in w.linked:
        assert a.user == b.user and a.id != b.id
        pa, pb = position[f"{a.id}-end-1"], position[f"{b.id}-end-1"]
        # side by side, or with one poison record between them
        assert 1 <= abs(pa - pb) <= 2
        assert said[(a.id, 1)] == said[(b.id, 1)]


@pytest.mark.parametrize("spec", SPECS)
def test_small_talk_is_never_a_memory_and_each_fact_is_one(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    quiet = {*V.SMALL_TALK, *V.REPLIES, V.SYSTEM_PROMPT, V.TOOL_RESULT, ""}
    t = datetime(2026, 1, 1)
    for m in w.messages:
        found = rule_judge([SourceMessage(m.event_id, m.role, m.content, t)])
        assert len(found) == (0 if m.content in quiet else 1), m.content
        if found and found[0].scope == "agent":
            assert m.role == "assistant" and m.content in V.LESSONS


@pytest.mark.parametrize("spec", SPECS)
def test_corrections_follow_their_fact_in_the_same_conversation(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    cands = judged(w)
    text_of = {m.event_id: m.content for m in w.messages}
    corrections = 0
    for (conv, s), found in cands.items():
        for c in found:
            if not text_of[c.source_event_ids[0]].startswith("Actually,"):
                continue
            corrections += 1
            slot = subject_slot(c.content)
            assert slot is not None
            earlier = [subject_slot(x.content) for k in range(1, s)
                       for x in cands.get((conv, k), [])]
            assert any(e is not None and e.key == slot.key and e.value != slot.value
                       for e in earlier), (conv, s, c.content)
    assert corrections >= spec.conversations // 10


@pytest.mark.parametrize("spec", SPECS)
def test_a_conflict_search_only_meets_its_own_conversation_or_the_same_sentence(
    spec: WorkloadSpec,
) -> None:
    """What makes the outcome independent of the order of concurrent sessions: the
    terms of a candidate occur in no memory another conversation can hold (user
    cube: its facts and episodes; agent cube: lessons) except the very same
    sentence; and the memories sharing a term with it are fewer than the
    search's top_k, so none is cut off whatever else the cube holds."""
    w = build_workload(spec)
    cands = judged(w)
    conv_of = {c.id: c for c in w.conversations}
    user_docs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    agent_docs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for (conv, _s), found in cands.items():
        c = conv_of[conv]
        for x in found:
            cube = user_docs[(c.tenant, c.user)] if x.scope == "user" else agent_docs[
                (c.tenant, c.agent)]
            cube.append((conv, x.content))
    for m in w.messages:
        if m.role in ("user", "assistant") and m.content:
            c = m.conversation
            user_docs[(c.tenant, c.user)].append((m.conversation.id, m.content))
    for (conv, _s), found in cands.items():
        c = conv_of[conv]
        for x in found:
            docs = (user_docs[(c.tenant, c.user)] if x.scope == "user"
                    else agent_docs[(c.tenant, c.agent)])
            terms = set(query_terms(x.content))
            meeting = [(owner, text) for owner, text in docs
                       if terms & set(tokenize(text))]
            for owner, text in meeting:
                assert owner == conv or x.content in text, (x.content, owner, text)
            if x.scope == "user":
                assert len(meeting) <= TOP_K, (x.content, meeting)
            # the lookup also finds the cube's facts by their subjects
            subjects = set(subject_keys(x.content))
            for owner, text in docs:
                if subjects & set(subject_keys(text)):
                    assert owner == conv or x.content in text, (x.content, owner, text)


def test_the_config_reads_its_environment() -> None:
    cfg = ChaosConfig.from_env({"CHAOS_SEED": "5", "CHAOS_CONVERSATIONS": "10",
                                "CHAOS_RATE": "200", "CHAOS_POISON": "off"})
    assert (cfg.workload.seed, cfg.workload.conversations, cfg.rate, cfg.workload.poison) == (
        5, 10, 200.0, False)
    assert ChaosConfig.from_env({}) == ChaosConfig()
    assert "CHAOS_SEED=5" in cfg.describe()
