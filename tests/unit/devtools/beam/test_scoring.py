"""Scoring BEAM replies: evidence inside the budget and listed, the order of knowledge
updates, tokens, latency and memories reaching other users' replies."""

from __future__ import annotations

import pytest

from streams.devtools.beam.dataset import Question
from streams.devtools.beam.scoring import (
    Asked,
    KuOrder,
    Memory,
    Reply,
    best_rank,
    chat_of,
    cross_user,
    event_id,
    ku_order,
    render_table,
    score,
    summarize,
)


def ev(*turns: int, chat: str = "1") -> tuple[str, ...]:
    return tuple(event_id(chat, t) for t in turns)


def mem(mid: str, *turns: int, chat: str = "1", cube: str = "user_profile",
        content: str = "") -> Memory:
    return Memory(mid, cube, content or f"memory {mid}", ev(*turns, chat=chat))


def q(*evidence: int, qtype: str = "information_extraction", chat: str = "1",
      original: tuple[int, ...] = (), updated: tuple[int, ...] = ()) -> Question:
    return Question(chat, qtype, "?", evidence, original, updated)


FILLER = tuple(mem(f"f{i}", 900 + i) for i in range(20))


@pytest.mark.parametrize(("source", "chat"), [
    ("beam-1:28", "1"), ("beam-10:0", "10"), ("beam-x-y:3", "x-y"),
    ("beam-1:session-2:end", None), ("conv-1:D1:1", None), ("", None),
])
def test_the_chat_of_an_event_id(source: str, chat: str | None) -> None:
    assert chat_of(source) == chat


@pytest.mark.parametrize(("question", "reply", "b4k", "all_in", "recall"), [
    # both turns inside the budget, one listed first, the other at 7
    (q(2, 4), Reply((mem("a", 2), *FILLER[:5], mem("b", 4)), ("a", "b"), ev(2, 4)),
     1.0, 1.0, {5: 0.5, 10: 1.0, 20: 1.0}),
    # one of two inside the budget; the other listed at 12
    (q(2, 4), Reply((mem("a", 2), *FILLER[:10], mem("b", 4)), ("a",), ev(2)),
     0.5, 0.0, {5: 0.5, 10: 0.5, 20: 1.0}),
    # a long turn represented by several memories counts once
    (q(2, 4), Reply((mem("a1", 2), mem("a2", 2), mem("a3", 2)), ("a1", "a2", "a3"), ev(2, 2, 2)),
     0.5, 0.0, {5: 0.5, 10: 0.5, 20: 0.5}),
    # a memory with no source events represents nothing; another chat's turn 2 neither
    (q(2), Reply((mem("n"), mem("o", 2, chat="9")), ("n", "o"), ev(2, chat="9")),
     0.0, 0.0, {5: 0.0, 10: 0.0, 20: 0.0}),
    # nothing listed, nothing inside
    (q(2), Reply(), 0.0, 0.0, {5: 0.0, 10: 0.0, 20: 0.0}),
])
def test_evidence_inside_the_budget_and_listed(question: Question, reply: Reply, b4k: float,
                                               all_in: float, recall: dict[int, float]) -> None:
    s = score(question, reply)
    assert s.has_evidence and (s.b4k, s.all_in, s.recall) == (b4k, all_in, recall)


def test_a_question_without_evidence_is_not_scored() -> None:
    s = score(q(qtype="abstention"), Reply((mem("a", 2),), ("a",), ev(2)))
    assert not s.has_evidence and (s.b4k, s.all_in) == (0.0, 0.0) and s.ku is None


@pytest.mark.parametrize(("memories", "turns", "rank"), [
    ((mem("a", 1), mem("b", 2), mem("c", 2)), ev(2), 2),
    ((mem("a", 1), mem("b", 2)), ev(3, 1), 1),
    ((mem("a", 1),), ev(5), None),
    ((), ev(1), None),
])
def test_best_rank(memories: tuple[Memory, ...], turns: tuple[str, ...], rank: int | None) -> None:
    assert best_rank(turns, memories) == rank


KU = {"qtype": "knowledge_update", "original": (10,), "updated": (20,)}


@pytest.mark.parametrize(("question", "reply", "order"), [
    # update inside the budget and listed above the original
    (q(10, 20, **KU), Reply((mem("u", 20), mem("o", 10)), ("u",), ev(20)),
     KuOrder(above=True, both_listed=True)),
    # listed above, but outside the budget
    (q(10, 20, **KU), Reply((mem("u", 20), mem("o", 10)), ("o",), ev(10)),
     KuOrder(above=False, both_listed=True)),
    # inside the budget but listed below the original
    (q(10, 20, **KU), Reply((mem("o", 10), mem("u", 20)), ("o", "u"), ev(10, 20)),
     KuOrder(above=False, both_listed=True)),
    # the original not listed counts as below
    (q(10, 20, **KU), Reply((*FILLER[:3], mem("u", 20)), ("u",), ev(20)),
     KuOrder(above=True, both_listed=False)),
    # inside the budget but not listed: no rank, not above
    (q(10, 20, **KU), Reply((mem("o", 10),), ("o", "u"), ev(10, 20)),
     KuOrder(above=False, both_listed=False)),
    # two updated turns: the second one is inside and above
    (q(10, 20, 21, qtype="knowledge_update", original=(10,), updated=(20, 21)),
     Reply((mem("b", 21), mem("o", 10), mem("a", 20)), ("b",), ev(21)),
     KuOrder(above=True, both_listed=True)),
    # a memory representing both: not better than itself
    (q(10, 20, **KU), Reply((Memory("x", "user_profile", "both", ev(10, 20)),), ("x",), ev(10, 20)),
     KuOrder(above=False, both_listed=True)),
    # one turn named as both (chats 8 and 9): skipped
    (q(214, qtype="knowledge_update", original=(214,), updated=(214,)),
     Reply((mem("u", 214),), ("u",), ev(214)), KuOrder(skipped=True)),
    # no update named, or another type: not measured
    (q(10, qtype="knowledge_update", original=(10,)), Reply(), None),
    (q(10, 20, qtype="contradiction_resolution", original=(10,), updated=(20,)), Reply(), None),
])
def test_knowledge_update_order(question: Question, reply: Reply,
                                order: KuOrder | None) -> None:
    assert ku_order(question, reply) == order


def asked(chat: str, reply: Reply | None, latency: float = 10.0, qtype: str = "abstention",
          evidence: tuple[int, ...] = ()) -> Asked:
    return Asked(q(*evidence, qtype=qtype, chat=chat), reply, latency, 1)


def test_cross_user_shares_of_other_users_replies() -> None:
    own = mem("own", 1, chat="1", cube="user_profile")  # chat 1's, reaching only chat 1
    leak = mem("leak", 5, chat="1", cube="agent_beam-agent", content="x" * 100)
    blank = Memory("blank", "agent_beam-agent", "no source")  # owned by no chat
    both = Memory("both", "agent_beam-agent", "two chats", (*ev(2, chat="1"), *ev(3, chat="2")))
    late = Memory("late", "agent_beam-agent", "listed at 11", ev(7, chat="2"))
    others = tuple(mem(f"g{i}", 800 + i, chat="2") for i in range(8))  # chat 2's, in 2's reply
    replies = [
        asked("1", Reply((own, leak, blank), ("own",))),
        asked("2", Reply((leak, both, *others, late), ("hidden",))),  # late at 11: not held
        asked("3", Reply((blank,), ("leak", "both"))),  # leak inside the budget only
        asked("3", Reply()),
        asked("4", None),  # no reply: not counted
    ]
    c = cross_user(replies)
    assert c.replies == 4
    shares = {o.memory_id: o.share for o in c.offenders}
    # leak: held by 2 of the 3 replies to chats 2 and 3; blank: by 2 of all 4;
    # both: by 2's reply (owned) and 3's (1 of 2 others); late: listed at 11 only, held by none
    assert shares == {"leak": 2 / 3, "blank": 0.5, "both": 0.5}
    assert c.max_share == 2 / 3 and c.above_limit == 3
    top = c.offenders[0]
    assert (top.cube, top.content, top.owners) == ("agent_beam-agent", "x" * 80, ("1",))
    assert c.offenders[1].owners == ()  # ties by id: blank before both
    assert c.unknown_sources == 1  # "hidden": inside a budget, never listed
    assert c.memories == 4 + len(others)  # own, leak, blank, both and chat 2's
    assert c.by_cube == {"user_profile": 1 + len(others), "agent_beam-agent": 3}


def test_summary_by_type_with_tokens_latency_and_unanswered() -> None:
    ie = Reply((mem("a", 2),), ("a",), ev(2), tokens_used=100)
    ku = Reply((mem("u", 20), mem("o", 10)), ("u", "o"), ev(20, 10), tokens_used=300)
    rows = [
        Asked(q(2), ie, 20.0, 1),
        Asked(q(2, 4), ie, 40.0, 2),
        Asked(q(10, 20, **KU), ku, 30.0, 3),
        Asked(q(214, qtype="knowledge_update", original=(214,), updated=(214,)), ie, 10.0, 4),
        Asked(q(qtype="abstention"), Reply(tokens_used=0), 50.0, 5),
        Asked(q(2), None, 30_000.0, 6),
    ]
    s = summarize(rows)
    assert (s.asked, s.unanswered, s.unscored, s.overall.questions) == (6, 1, 1, 4)
    assert list(s.by_type) == ["information_extraction", "knowledge_update"]
    assert s.by_type["information_extraction"].b4k == 0.75
    assert s.by_type["information_extraction"].all_in == 0.5
    assert s.by_type["knowledge_update"].recall[10] == 0.5  # 1.0 and 0.0 (214 not listed)
    assert (s.ku.questions, s.ku.above, s.ku.both_listed, s.ku.skipped) == (1, 1, 1, 1)
    assert (s.tokens_mean, s.tokens_median, s.tokens_max) == (120.0, 100.0, 300)
    assert (s.p50_ms, s.p99_ms) == (30.0, pytest.approx(49.6))
    doc = s.as_json()
    assert doc["questions"] == 4 and doc["asked"] == 6 and doc["b4k"] == 0.625
    assert doc["knowledge_update"] == {"questions": 1, "above": 1, "share_above": 1.0,
                                       "both_listed": 1, "share_above_both_listed": 1.0,
                                       "skipped": 1}
    assert [p["n"] for p in doc["per_question"]] == [1, 2, 3, 4, 5, 6]
    table = render_table(s, budget=4000, arrivals="closed loop, 4 in flight")
    for line in ("information_extraction", "overall",
                 "1 question(s) without evidence ids (abstention 1)", "1 question(s) got no reply",
                 "updated above original in 1/1 (100.0%)",
                 "1 skipped", "tokens used (budget 4000): mean 120, median 100, max 300",
                 "p50 30.0 ms", "cross-user: largest share"):
        assert line in table


def test_an_empty_run_summarizes_to_zeros() -> None:
    s = summarize([])
    assert (s.asked, s.overall.questions, s.tokens_max, s.cross.max_share) == (0, 0, 0, 0.0)
    assert "no question measured" in render_table(s)
