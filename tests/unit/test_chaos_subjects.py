"""The chaos workload's odd identities, group chats and planned erasures."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.chaos import vocabulary as V
from tests.chaos.config import WorkloadSpec
from tests.chaos.subjects import ID_MAX, LONG_AGENT_LEN, odd_users
from tests.chaos.workload import build_workload

SMALL = WorkloadSpec(seed=11, conversations=60, users=20, tenants=2, active=10, linked_pairs=4)
SPECS = [SMALL, replace(SMALL, seed=12), WorkloadSpec()]


def test_odd_users_are_twins_in_the_first_users_tenant() -> None:
    users = [("t0", "u000"), ("t1", "u001"), ("t0", "u002"), ("t0", "u003"), ("t0", "u004")]
    odd = odd_users(users)
    assert odd[:2] == users[:2]
    assert [u for _, u in odd[2:]] == ["U000", "\u057d000", ("u000-" + "x" * 300)[:ID_MAX]]
    assert {t for t, _ in odd[2:]} == {"t0"}
    assert len({u for _, u in odd}) == len(odd)


@pytest.mark.parametrize("spec", SPECS)
def test_the_workload_speaks_with_odd_ids(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    tenant, first = w.conversations[0].tenant, "u000"
    users = {m.user for m in w.messages if m.conversation.tenant == tenant}
    assert {first, first.upper(), "\u057d000"} <= users
    assert any(len(u) == ID_MAX for u in users)
    assert any(len(c.agent) == LONG_AGENT_LEN for c in w.conversations)
    assert not build_workload(replace(spec, odd_ids=False)).messages[0].user.isupper()


@pytest.mark.parametrize("spec", SPECS)
def test_group_chats_have_two_speakers_and_the_planned_ender(spec: WorkloadSpec) -> None:
    w = build_workload(spec)
    groups = [c for c in w.conversations if c.speakers]
    assert len(groups) == spec.group_chats
    for i, g in enumerate(groups):
        said = {m.user for m in w.messages if m.conversation.id == g.id}
        assert said == set(g.speakers)
        ends = [json.loads(r.value) for r in w.records if r.key == g.id.encode()
                and b'"session_end"' in r.value]
        assert [e["user_id"] for e in ends] == [g.speakers[i % 2]] * len(ends)
        assert all(m.user == g.speakers[0] or m.user == g.speakers[1]
                   for m in w.messages if m.conversation.id == g.id)


@pytest.mark.parametrize("spec", SPECS)
def test_the_erasures_erase_what_they_name_and_their_subjects_are_quiet(
    spec: WorkloadSpec,
) -> None:
    w = build_workload(spec)
    assert [e.target for e in w.erasures] == ["user", "conversation", "memory", "user", "user"]
    ends = {json.loads(w.records[i].value)["event_id"]: i for i, r in enumerate(w.records)
            if r.topic == "chat" and b'"session_end"' in r.value}
    for e in w.erasures:
        if e.target == "user":
            assert e.events == {m.event_id for m in w.messages
                                if (m.conversation.tenant, m.user) == (e.tenant, e.subject)}
        elif e.target == "conversation":
            assert e.events == {m.event_id for m in w.messages
                                if m.conversation.id == e.subject}
            assert e.at > ends[f"{e.subject}-end-1"] / len(w.records)
        else:
            assert not e.events and e.subject in {m.event_id for m in w.messages
                                                  if m.role == "user"}
        assert e.events or e.target == "memory"
        assert not [m for m in w.messages if m.event_id in e.events
                    and (m.content in V.LESSONS or m.role in ("system", "tool"))]
    user, group_end, aimed = w.erasures[0], w.erasures[3], w.erasures[4]
    assert user.subject == "u000"
    g0 = next(c for c in w.conversations if c.speakers and c.speakers[0] == group_end.subject)
    assert group_end.at < ends[f"{g0.id}-end-2"] / len(w.records)
    assert aimed.aim in {s.closed_id for s in w.sessions}
    assert not build_workload(replace(spec, erasures=False)).erasures


@pytest.mark.parametrize("spec", SPECS)
def test_returning_conversations_end_the_stream_with_their_last_session(
    spec: WorkloadSpec,
) -> None:
    w = build_workload(spec)
    late = {json.loads(r.value)["conversation_id"] for r in w.records[w.late_from:]
            if r.topic == "chat" and r.value not in {p.value for p in w.poison}}
    assert len(late) == spec.returning
    last = {c: max(s.seq for s in w.sessions if s.conversation.id == c) for c in late}
    for m in w.messages:
        if m.conversation.id in late:
            assert (m.position >= w.late_from) == (m.session == last[m.conversation.id])
    assert build_workload(replace(spec, returning=0)).late_from == len(w.records)
