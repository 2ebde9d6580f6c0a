"""The chaos checks: a perfect snapshot passes them all, and each kind of damage
fails exactly the check that covers it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.chaos.checks import (
    REDIS_HISTORY_MAX,
    check_phase,
    deadline_queries_in_time,
    memory_identity,
    stretches,
)
from tests.chaos.config import WorkloadSpec
from tests.chaos.erasure_checks import erased_events, erasure_checks
from tests.chaos.snapshot import (
    DeadLetter,
    DeadlineTally,
    Lag,
    MemoryRow,
    Snapshot,
    StoredMessage,
)
from tests.chaos.workload import Workload, build_workload

SPEC = WorkloadSpec(seed=3, conversations=20, users=8, tenants=2, active=5, linked_pairs=2)
FACT = MemoryRow("acme", "user_profile", "u000", "fact", "text", "I live in Oslo.", ("c0000-1",))
EPISODE = MemoryRow("acme", "user_profile", "u000", "episode", "text", "User: I live in Oslo.",
                    ("c0000-1",))


def perfect(w: Workload) -> Snapshot:
    messages = [StoredMessage(i + 1, m.conversation.tenant, m.event_id, m.conversation.id)
                for i, m in enumerate(w.messages)]
    lists = {f"{t}:{c}": list(reversed(ids))[:REDIS_HISTORY_MAX]
             for (t, c), ids in w.by_conversation().items()}
    return Snapshot(
        messages=messages,
        runs={s.closed_id: "done" for s in w.sessions},
        ledger={s.closed_id: list(s.event_ids) for s in w.sessions},
        memories=[FACT, EPISODE],
        dead_letters=[DeadLetter(p.value, "ingest", "undecodable", "chat") for p in w.poison],
        queries_sent=[b"q0", b"q1"], replies=[b"q1", b"q0"],
        redis_lists=lists,
        lag=[Lag("g", "chat", p, 10, 10) for p in range(4)],
    )


def failing(w: Workload, snap: Snapshot, reference: Snapshot) -> set[str]:
    return {f.check for f in check_phase(w, snap, reference) if not f.ok}


@pytest.fixture(scope="module")
def workload() -> Workload:
    return build_workload(SPEC)


def test_a_perfect_snapshot_passes_everything(workload: Workload) -> None:
    snap = perfect(workload)
    findings = check_phase(workload, snap, perfect(workload))
    assert [f.check for f in findings if not f.ok] == []
    assert len(findings) == 11


def _drop_message(s: Snapshot) -> None:
    s.messages.pop(3)


def _store_twice(s: Snapshot) -> None:
    s.messages.append(replace(s.messages[0], id=10_000))


def _swap_rows(s: Snapshot) -> None:
    by_conv = [m for m in s.messages if m.conversation == s.messages[0].conversation]
    a, b = by_conv[0], by_conv[1]
    s.messages[s.messages.index(a)] = replace(a, id=b.id)
    s.messages[s.messages.index(b)] = replace(b, id=a.id)


def _store_poison(s: Snapshot) -> None:
    s.messages.append(StoredMessage(99_999, "acme", "poison-3-lone_surrogate", "c0001"))


def _run_missing(s: Snapshot) -> None:
    s.runs.pop(next(iter(s.runs)))


def _run_not_done(s: Snapshot) -> None:
    s.runs[next(iter(s.runs))] = "judged"


def _idle_close(s: Snapshot) -> None:
    s.runs["acme/c0000#9"] = "done"


def _ledger_takes_next_session(s: Snapshot) -> None:
    ids = list(s.ledger)
    first = next(c for c in ids if c.endswith("#1") and c.replace("#1", "#2") in s.ledger)
    second = first.replace("#1", "#2")
    s.ledger[first] = s.ledger[first] + s.ledger[second][:1]
    s.ledger[second] = s.ledger[second][1:]


def _memory_twice(s: Snapshot) -> None:
    s.memories.append(replace(FACT, source_event_ids=("c0003-2",)))


def _memory_lost(s: Snapshot) -> None:
    s.memories.remove(FACT)


def _poison_twice(s: Snapshot) -> None:
    s.dead_letters.append(s.dead_letters[0])


def _poison_missing(s: Snapshot) -> None:
    s.dead_letters.pop()


def _good_event_dead_lettered(s: Snapshot) -> None:
    s.dead_letters.append(DeadLetter(b'{"event_id": "c0000-1"}', "ingest", "schema", "chat"))


def _reply_twice(s: Snapshot) -> None:
    s.replies.append(b"q0")


def _reply_missing(s: Snapshot) -> None:
    s.replies.remove(b"q1")


def _redis_twice(s: Snapshot) -> None:
    key = next(iter(s.redis_lists))
    s.redis_lists[key] = [s.redis_lists[key][0], *s.redis_lists[key]]


def _redis_partial(s: Snapshot) -> None:
    key = next(iter(s.redis_lists))
    s.redis_lists[key] = s.redis_lists[key][1:]


def _lag(s: Snapshot) -> None:
    s.lag[2] = replace(s.lag[2], committed=9)


def _uncovered(s: Snapshot) -> None:
    s.uncovered.append(("retry", 3, 1))


ONCE = "every chat message stored exactly once (none erased)"
ORDER = "messages in produce order per conversation (row id order)"
RUNS = "one done consolidation run per session end"
LEDGER = "each run's ledger is exactly its session's messages"
UNIQUE = "no valid memory twice"
SAME = "valid memories identical to the undisturbed phase, less the erased"
POISON = "every poison record in the dead-letter topic exactly once"
OTHER = "nothing else dead-lettered"
QUERIES = "every query answered exactly once"
REDIS = "Redis lists: no event twice, each the newest stored messages in order"
LAG = "final lag 0 on every input partition, for every consumer group"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_drop_message, {ONCE, REDIS}),
        (_store_twice, {ONCE, ORDER, REDIS}),
        (_swap_rows, {ORDER, REDIS}),
        (_store_poison, {ONCE}),
        (_run_missing, {RUNS}),
        (_run_not_done, {RUNS}),
        (_idle_close, {RUNS}),
        (_ledger_takes_next_session, {LEDGER}),
        (_memory_twice, {UNIQUE}),
        (_memory_lost, {SAME}),
        (_poison_twice, {POISON}),
        (_poison_missing, {POISON}),
        (_good_event_dead_lettered, {OTHER}),
        (_reply_twice, {QUERIES}),
        (_reply_missing, {QUERIES}),
        (_redis_twice, {REDIS}),
        (_redis_partial, {REDIS}),
        (_lag, {LAG}),
        (_uncovered, {LAG}),
    ],
)
def test_each_damage_fails_its_check(workload: Workload, damage: Callable[[Snapshot], None],
                                     expected: set[str]) -> None:
    snap = copy.deepcopy(perfect(workload))
    damage(snap)
    assert failing(workload, snap, perfect(workload)) == expected


def test_memory_identity_ignores_the_sources_of_facts_only() -> None:
    assert memory_identity(FACT) == memory_identity(replace(FACT, source_event_ids=("x",)))
    assert memory_identity(EPISODE) != memory_identity(replace(EPISODE, source_event_ids=("x",)))
    assert memory_identity(FACT) != memory_identity(replace(FACT, owner="u001"))


def test_a_failure_names_counts_and_examples(workload: Workload) -> None:
    snap = perfect(workload)
    for _ in range(8):
        snap.messages.pop(0)
    (found,) = [f for f in check_phase(workload, snap) if f.check == ONCE]
    text = found.render("B")
    assert text.startswith(f"FAIL [B] {ONCE}: {len(workload.messages)} produced")
    assert "8 missing" in text and "(+3 more)" in text
    assert "missing, where in the stream: 0.0%-" in text


def test_stretches_group_nearby_positions() -> None:
    assert stretches([5, 1, 90, 500, 520, 900], 1000) == [
        "0.1%-9.0% (3)", "50.0%-52.0% (2)", "90.0%-90.0% (1)"]


@pytest.mark.parametrize(("allowed", "asked", "outage", "late", "ok"), [
    (0.0, 100, 0, 0, True),
    (0.0, 100, 0, 1, False),
    (0.05, 100, 0, 5, True),
    (0.05, 100, 0, 6, False),
    (0.05, 10, 0, 1, False),
    # a share of those asked while a worker was live, not of all asked
    (0.05, 100, 20, 4, True),
    (0.05, 100, 20, 5, False),
])
def test_deadline_callers_are_late_at_most_their_allowed_share_while_a_worker_is_live(
        allowed: float, asked: int, outage: int, late: int, ok: bool) -> None:
    tally = DeadlineTally("c", 0.3, allowed, asked, late, [1.0] * late, outage, 0, 0, 0, 0.5,
                          0, 0, 0)
    assert deadline_queries_in_time(Snapshot(deadline=[tally])).ok is ok


def test_a_query_asked_during_a_rebalance_counts_and_one_during_an_outage_does_not() -> None:
    from streams.client import QueryOutcome
    from tests.chaos.phases import tally
    from tests.chaos.traffic import DeadlineClass

    c = DeadlineClass("1 s", 1.0)
    late, ok = QueryOutcome(1.0, False, True, False, 0), QueryOutcome(0.1, True, False, False, 0)
    # asked at 10 (an outage 10.5-20), 30 (a rebalance 30-40), 50 (nothing), 60 (answered)
    c.outcomes = [(10.0, late), (30.0, late), (50.0, late), (60.0, ok)]
    t = tally(c, 0.0, outages=[(10.5, 20.0)], rebalances=[(30.0, 40.0)])
    assert (t.asked, t.late, t.late_at) == (4, 2, [30.0, 50.0])
    assert (t.outage_asked, t.outage_late, t.rebalance_asked, t.rebalance_late) == (1, 1, 1, 1)
    # where each late one went, in the check's message
    assert t.late_where == ["30.0 s: partition 0, hedged", "50.0 s: partition 0, hedged"]
    message = deadline_queries_in_time(Snapshot(deadline=[t])).render("B")
    assert "50.0 s: partition 0, hedged" in message


# ------------------------------------------------------------------ erasures
DONE = "every erasure done (its receipt says so)"
NOTHING = "nothing erased in any store or reply"
KEPT = MemoryRow("acme", "user_profile", "u001", "episode", "text", "User: hello", ("k-1",),
                 "m-kept")
GONE = MemoryRow("acme", "user_profile", "u001", "episode", "text", "User: bye", ("k-2",),
                 "m-gone")


def erased_perfect(w: Workload) -> tuple[Snapshot, Snapshot]:
    """(phase B with every erasure done, its reference): the reference holds a fact
    and an episode of the erased user, an episode erased by id and one kept."""
    erased = erased_events(w)
    snap = perfect(w)
    snap.messages = [m for m in snap.messages if (m.tenant, m.event_id) not in erased]
    gone_runs = {x.closed_id for x in w.sessions
                 if {(x.conversation.tenant, e) for e in x.event_ids} <= erased}
    snap.runs = {c: st for c, st in snap.runs.items() if c not in gone_runs}
    snap.ledger = {c: [e for e in ids if (c.split("/")[0], e) not in erased]
                   for c, ids in snap.ledger.items() if c not in gone_runs}
    left = {(t, c): [e for e in ids if (t, e) not in erased]
            for (t, c), ids in w.by_conversation().items()}
    snap.redis_lists = {f"{t}:{c}": list(reversed(ids))[:REDIS_HISTORY_MAX]
                        for (t, c), ids in left.items() if ids}
    snap.memories = [KEPT]
    snap.erasures = [(e.describe(), "done") for e in w.erasures]
    snap.erased_memories = [GONE]
    snap.after_erasure = {"acme/u000": [], "acme/g0b": ["g000-3"]}
    reference = perfect(w)
    reference.memories = [FACT, EPISODE, KEPT, GONE]
    return snap, reference


def erasure_failing(w: Workload, snap: Snapshot, reference: Snapshot) -> set[str]:
    erased = erased_events(w)
    found = check_phase(w, snap, reference, erased) + erasure_checks(w, snap, erased)
    return {f.check for f in found if not f.ok}


def test_an_erased_perfect_snapshot_passes_everything(workload: Workload) -> None:
    assert len(workload.erasures) == 5
    snap, reference = erased_perfect(workload)
    assert erasure_failing(workload, snap, reference) == set()
    # without the erasures the same snapshot misses what was erased
    assert {ONCE, SAME} <= failing(workload, snap, reference)


def _erased_message_back(w: Workload, s: Snapshot) -> None:
    e = w.erasures[0]
    s.messages.append(StoredMessage(50_000, e.tenant, sorted(e.events)[0], "c0000"))


def _erased_users_memory_back(w: Workload, s: Snapshot) -> None:
    s.memories.append(FACT)


def _erased_memory_back(w: Workload, s: Snapshot) -> None:
    s.memories.append(GONE)


def _erasure_blocked(w: Workload, s: Snapshot) -> None:
    s.erasures[2] = (s.erasures[2][0], "blocked (database)")


def _reply_gives_erased(w: Workload, s: Snapshot) -> None:
    e = w.erasures[3]
    s.after_erasure[f"{e.tenant}/{e.subject}"] = [sorted(e.events)[0]]


def _row_left(w: Workload, s: Snapshot) -> None:
    s.leftovers["conversation_summary (acme/u000)"] = 1


def _touched_run_gone(w: Workload, s: Snapshot) -> None:
    group = w.erasures[3]
    closed = next(x.closed_id for x in w.sessions if x.conversation.speakers
                  and x.conversation.speakers[0] == group.subject)
    s.runs.pop(closed, None)
    s.ledger.pop(closed, None)


def _kept_memory_lost(w: Workload, s: Snapshot) -> None:
    s.memories.remove(KEPT)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (_erased_message_back, {ONCE, NOTHING}),
        (_erased_users_memory_back, {SAME, NOTHING}),
        (_erased_memory_back, {SAME, NOTHING}),
        (_erasure_blocked, {DONE}),
        (_reply_gives_erased, {NOTHING}),
        (_row_left, {NOTHING}),
        (_touched_run_gone, set()),
        (_kept_memory_lost, {SAME}),
    ],
)
def test_each_erasure_damage_fails_its_check(
    workload: Workload, damage: Callable[[Workload, Snapshot], None], expected: set[str],
) -> None:
    snap, reference = erased_perfect(workload)
    damage(workload, snap)
    assert erasure_failing(workload, snap, reference) == expected
