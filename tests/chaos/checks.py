"""The chaos checks: what one phase's outside state must be, given the workload.

Pure: a :class:`~tests.chaos.snapshot.Snapshot` (read from SQL, topics and
Redis after the phase settled) and the :class:`~tests.chaos.workload.Workload`
in, one :class:`Finding` per check out, each exact — a count that must be
equal, never roughly. A failing finding says what differs, with counts and a
few examples.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.chaos.snapshot import MemoryRow, Snapshot
from tests.chaos.workload import Workload

EXAMPLES = 5
REDIS_HISTORY_MAX = 200  # MEMSTREAM_REDIS__HISTORY_MAX


@dataclass
class Finding:
    check: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)

    def render(self, phase: str) -> str:
        head = f"{'ok  ' if self.ok else 'FAIL'} [{phase}] {self.check}: {self.summary}"
        return "\n".join([head, *(f"       {d}" for d in self.details)])


def _examples(label: str, items: Iterable[object]) -> list[str]:
    got = list(items)
    if not got:
        return []
    shown = ", ".join(str(x) for x in got[:EXAMPLES])
    more = f" (+{len(got) - EXAMPLES} more)" if len(got) > EXAMPLES else ""
    return [f"{label}: {shown}{more}"]


def _finding(check: str, problems: dict[str, Sequence[object]], summary: str) -> Finding:
    details = [line for label, items in problems.items() for line in _examples(label, items)]
    return Finding(check, not any(problems.values()), summary, details)


def stretches(positions: Iterable[int], total: int, gap: int = 100) -> list[str]:
    """Positions in the stream as stretches of its published share, to set beside the
    timeline: ``"38.1%-40.2% (120)"``."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and p - runs[-1][-1] <= gap:
            runs[-1].append(p)
        else:
            runs.append([p])
    return [f"{r[0] / total:.1%}-{r[-1] / total:.1%} ({len(r)})" for r in runs]


Erased = frozenset[tuple[str, str]]  # (tenant, event id) of the messages erasures took
NONE: Erased = frozenset()


def messages_once(w: Workload, s: Snapshot, erased: Erased = NONE) -> Finding:
    expected = {(m.conversation.tenant, m.event_id) for m in w.messages} - erased
    stored = Counter((m.tenant, m.event_id) for m in s.messages)
    missing = sorted(expected - set(stored))
    unexpected = sorted(set(stored) - expected)
    twice = sorted(k for k, n in stored.items() if n > 1)
    where = {(m.conversation.tenant, m.event_id): m.position for m in w.messages}
    return _finding("every chat message stored exactly once (none erased)", {
        "missing": [f"{t}/{e}" for t, e in missing],
        "missing, where in the stream": stretches((where[k] for k in missing), len(w.records)),
        "not in the workload": [f"{t}/{e}" for t, e in unexpected],
        "stored twice": [f"{t}/{e}" for t, e in twice],
    }, f"{len(expected)} produced, {len(stored)} stored, {len(missing)} missing, "
       f"{len(unexpected)} not in the workload, {len(twice)} twice")


def messages_in_order(w: Workload, s: Snapshot) -> Finding:
    stored: dict[tuple[str, str], list[str]] = defaultdict(list)
    for m in sorted(s.messages, key=lambda m: m.id):
        stored[(m.tenant, m.conversation)].append(m.event_id)
    wrong = []
    for key, produced in w.by_conversation().items():
        rank = {e: i for i, e in enumerate(produced)}
        got = [e for e in stored.get(key, []) if e in rank]
        first = next((i for i in range(1, len(got)) if rank[got[i]] < rank[got[i - 1]]), None)
        if first is not None:
            wrong.append(f"{key[0]}/{key[1]} ({got[first]} stored after {got[first - 1]})")
    return _finding("messages in produce order per conversation (row id order)",
                    {"out of order": wrong},
                    f"{len(wrong)} of {len(w.by_conversation())} conversations out of order")


def _touched(w: Workload, erased: Erased) -> set[str]:
    """Sessions an erasure took messages of: their run may be gone with the erased
    user (it carries the conversation's user), or was never made."""
    return {x.closed_id for x in w.sessions
            if any((x.conversation.tenant, e) in erased for e in x.event_ids)}


def sessions_consolidated(w: Workload, s: Snapshot, erased: Erased = NONE) -> Finding:
    """A done run per session end; a session an erasure took messages of has a done
    run or none (what is left of it is checked by the memories and the ledger)."""
    expected = {x.closed_id for x in w.sessions}
    missing = sorted(expected - set(s.runs) - _touched(w, erased))
    unfinished = sorted(f"{c} ({st})" for c, st in s.runs.items()
                        if c in expected and st != "done")
    unexpected = sorted(f"{c} ({st})" for c, st in s.runs.items() if c not in expected)
    done = sum(1 for c, st in s.runs.items() if c in expected and st == "done")
    return _finding("one done consolidation run per session end", {
        "no run": missing, "not done": unfinished, "runs of no session end": unexpected,
    }, f"{len(expected)} session ends, {done} done, {len(missing)} without a run, "
       f"{len(unfinished)} not done, {len(unexpected)} unexpected runs")


def ledger_exact(w: Workload, s: Snapshot, erased: Erased = NONE) -> Finding:
    """A run's ledger is its session's messages, less those erased; a session erasures
    took messages of, whose run is gone, keeps ledger rows of its messages left only."""
    wrong, lost, foreign = [], 0, 0
    touched = _touched(w, erased)
    for x in w.sessions:
        left = {e for e in x.event_ids if (x.conversation.tenant, e) not in erased}
        if x.closed_id not in s.runs:
            if x.closed_id in touched and set(s.ledger.get(x.closed_id, [])) <= left:
                continue
            if x.closed_id not in touched:
                continue  # reported by sessions_consolidated
        got, want = set(s.ledger.get(x.closed_id, [])), left
        if got != want:
            lost += len(want - got)
            foreign += len(got - want)
            some = [f"-{e}" for e in sorted(want - got)][:2] + [f"+{e}" for e in
                                                                 sorted(got - want)][:2]
            wrong.append(f"{x.closed_id} ({' '.join(some)})")
    expected = {x.closed_id for x in w.sessions}
    strays = sorted(c for c in s.ledger if c not in expected)
    return _finding("each run's ledger is exactly its session's messages", {
        "runs with other messages (-missing +foreign, first ones)": wrong,
        "ledger rows of no session end": strays,
    }, f"{len(wrong)} runs differ: {lost} of their messages missing, {foreign} foreign")


def memory_identity(m: MemoryRow) -> tuple[str, ...]:
    """What must be equal between two correct runs: not ids or times, and the source
    events only for episodes (a fact stated twice keeps whichever came first)."""
    sources = ",".join(m.source_event_ids) if m.kind == "episode" else ""
    return (m.tenant, m.cube, m.owner, m.kind, m.type, m.content, sources)


def _show(identity: tuple[str, ...]) -> str:
    tenant, cube, owner, kind, type_, content, _ = identity
    return f"{tenant}/{cube}/{owner or '-'} {kind}:{type_} {content!r}"


def memories_unique(s: Snapshot) -> Finding:
    counts = Counter(memory_identity(m) for m in s.memories)
    twice = sorted((k for k, n in counts.items() if n > 1), key=_show)
    facts = sum(1 for m in s.memories if m.kind == "fact")
    return _finding("no valid memory twice", {
        "valid more than once": [f"{_show(k)} x{counts[k]}" for k in twice],
    }, f"{len(s.memories)} valid ({facts} facts), {len(twice)} held more than once "
       f"({sum(counts[k] - 1 for k in twice)} extra)")


def memories_as_reference(s: Snapshot, reference: Snapshot, erased: Erased = NONE) -> Finding:
    """The undisturbed phase's memories, less those judged from an erased message and
    the memories erased one by one."""
    ours = {memory_identity(m) for m in s.memories}
    theirs = {memory_identity(m) for m in reference.memories
              if not any((m.tenant, e) in erased for e in m.source_event_ids)}
    theirs -= {memory_identity(m) for m in s.erased_memories}
    missing = sorted(theirs - ours, key=_show)
    extra = sorted(ours - theirs, key=_show)
    return _finding("valid memories identical to the undisturbed phase, less the erased", {
        "missing": [_show(k) for k in missing], "extra": [_show(k) for k in extra],
    }, f"reference {len(theirs)} distinct, here {len(ours)}: {len(missing)} missing, "
       f"{len(extra)} extra")


def poison_dead_lettered_once(w: Workload, s: Snapshot) -> Finding:
    counts = Counter(d.value for d in s.dead_letters)
    missing = [p.name for p in w.poison if counts[p.value] == 0]
    twice = [f"{p.name} x{counts[p.value]}" for p in w.poison if counts[p.value] > 1]
    return _finding("every poison record in the dead-letter topic exactly once", {
        "not dead-lettered": missing, "dead-lettered more than once": twice,
    }, f"{len(w.poison)} poison records, {len(missing)} missing, {len(twice)} more than once")


def no_other_dead_letters(w: Workload, s: Snapshot) -> Finding:
    poison = {p.value for p in w.poison}
    other = [d for d in s.dead_letters if d.value not in poison]
    kinds = Counter(f"{d.stage}/{d.reason} from {d.source_topic}" for d in other)
    return _finding("nothing else dead-lettered", {
        "dead letters": [f"{k} x{n}" for k, n in kinds.most_common()],
    }, f"{len(other)} other dead letters")


def queries_answered_once(s: Snapshot) -> Finding:
    counts = Counter(s.replies)
    unanswered = [c.decode() for c in s.queries_sent if counts[c] == 0]
    twice = [f"{c.decode()} x{counts[c]}" for c in s.queries_sent if counts[c] > 1]
    sent = set(s.queries_sent)
    strangers = [c.decode(errors="replace") for c in counts if c not in sent]
    errors = Counter(s.reply_errors)
    return _finding("every query answered exactly once", {
        "unanswered": unanswered, "answered more than once": twice,
        "replies to no query": strangers,
    }, f"{len(sent)} queries, {len(s.replies)} replies, {len(unanswered)} unanswered, "
       f"{len(twice)} more than once; reply errors: {dict(errors) or 'none'}")


def deadline_queries_in_time(s: Snapshot) -> Finding:
    """Callers with a real deadline got their replies within it, once (the client passes
    one reply on and drops a second), whenever a worker was live — also while the query
    group rebalanced: every one at 1 s (the promise); at 300 ms at most the class's
    allowed share late (every process of the test shares two cores, and a worker
    starting beside the live one slows it by a few hundred milliseconds). Without
    hedging and take-over the requests asked in a rebalance or after a SIGKILL come
    late, far more than that share."""
    late = [f"{d.name}: {d.late} of {d.asked - d.outage_asked} "
            f"(allowed {d.late_allowed:.0%}), asked at {d.late_at} s "
            f"({'; '.join(d.late_where)})"
            for d in s.deadline if d.too_late]
    return _finding("deadline callers answered within their deadline, once, while a worker "
                    "was live (1 s: all; 300 ms: 90 %)", {
        "late": late,
    }, "; ".join(f"{d.name}: {d.asked} asked, {d.late} late"
                 f"{f' (asked at {d.late_at} s)' if d.late else ''}, "
                 f"{d.outage_asked} asked while no worker was live ({d.outage_late} late), "
                 f"{d.rebalance_asked} while the query group rebalanced "
                 f"({d.rebalance_late} late), slowest {d.slowest_s * 1000:.0f} ms "
                 f"(the slowest asked at "
                 f"{', '.join(f'{at} s' for _, at in d.slowest) or '-'}), "
                 f"{d.hedges_sent} hedged, {d.hedges_won} won by the hedge, "
                 f"{d.duplicates_dropped} second replies dropped" for d in s.deadline))


def redis_lists(s: Snapshot) -> Finding:
    """A list is a cache of the database: when it exists it holds the conversation's
    newest stored messages, newest first, each once (lost messages are another check)."""
    stored: dict[str, list[str]] = defaultdict(list)
    for m in sorted(s.messages, key=lambda m: m.id):
        stored[f"{m.tenant}:{m.conversation}"].append(m.event_id)
    twice, partial = [], []
    for key, ids in sorted(s.redis_lists.items()):
        if len(set(ids)) != len(ids):
            dup = [e for e, n in Counter(ids).items() if n > 1]
            twice.append(f"{key} ({', '.join(dup[:3])})")
        want = list(reversed(stored.get(key, [])))[:REDIS_HISTORY_MAX]
        if ids != want:
            partial.append(f"{key} ({len(ids)} held, {len(want)} stored)")
    return _finding("Redis lists: no event twice, each the newest stored messages in order", {
        "an event twice": twice, "not the conversation's newest stored messages": partial,
    }, f"{len(s.redis_lists)} lists, {len(twice)} with an event twice, "
       f"{len(partial)} differ from the database")


def lag_zero(s: Snapshot) -> Finding:
    behind = [f"{r.group} {r.topic}[{r.partition}] {r.committed}/{r.end}"
              for r in s.lag if r.committed < r.end]
    uncovered = [f"{t}[{p}] end {e}" for t, p, e in s.uncovered]
    groups = sorted({r.group for r in s.lag})
    return _finding("final lag 0 on every input partition, for every consumer group", {
        "behind": behind, "consumed to the end by no group": uncovered,
    }, f"groups {groups}: {len(behind)} partitions behind, {len(uncovered)} uncovered")


def check_phase(w: Workload, s: Snapshot, reference: Snapshot | None = None,
                erased: Erased = NONE) -> list[Finding]:
    """``erased``: the messages the phase's erasures took (none for the undisturbed one)."""
    out = [messages_once(w, s, erased), messages_in_order(w, s),
           sessions_consolidated(w, s, erased), ledger_exact(w, s, erased), memories_unique(s)]
    if reference is not None:
        out.append(memories_as_reference(s, reference, erased))
    out += [poison_dead_lettered_once(w, s), no_other_dead_letters(w, s)]
    if s.queries_sent:
        out.append(queries_answered_once(s))
    if s.deadline:
        out.append(deadline_queries_in_time(s))
    out += [redis_lists(s), lag_zero(s)]
    if s.held_back is not None:
        out.append(held_back(s, required=reference is None))
    if s.rejoins is not None and reference is None:
        out.append(no_rejoins(s))
    return out


def no_rejoins(s: Snapshot) -> Finding:
    """With one worker and no fault, no record is passed over: the commit guard never
    asks the group to rebalance (a record held back on purpose is not passed over)."""
    return Finding("no rebalance asked for records passed over (one worker, no fault)",
                   s.rejoins == 0, f"{s.rejoins} asked")


def held_back(s: Snapshot, *, required: bool) -> Finding:
    """The paced tenant (``tests.chaos.phases.PACED_ENV``) went over its quota of events
    and had events held back: its messages, checked stored once and in order above,
    went through the delay path. ``required`` in the undisturbed phase (the workload
    published at once, one worker throughout); in the others only reported, the
    counts of killed workers gone with them."""
    n = s.held_back or 0
    return Finding("the paced tenant's events held back over its quota (all stored, above)",
                   n > 0 or not required,
                   f"{n} held back, as counted by the workers live at the end")
