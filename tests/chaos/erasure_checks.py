"""The chaos checks of the disturbed phase's erasures: pure, like :mod:`.checks`.

The other checks already take the erased messages out of what they expect
(stored messages, runs and ledgers, the undisturbed phase's memories); these
say that every erasure was done and that nothing erased is anywhere: a stored
message, a ledger row, a Redis list, a memory judged from an erased message or
in an erased user's cube, the memory erased by id, a reply given once the phase
settled, a row of any table naming an erased user or conversation.
"""

from __future__ import annotations

from tests.chaos.checks import Erased, Finding, _finding
from tests.chaos.snapshot import Snapshot
from tests.chaos.workload import Workload


def erased_events(w: Workload) -> Erased:
    """(tenant, event id) of every message the workload's erasures take."""
    return frozenset((e.tenant, ev) for e in w.erasures for ev in e.events)


def erasures_done(w: Workload, s: Snapshot) -> Finding:
    bad = [f"{what}: {status}" for what, status in s.erasures if status != "done"]
    return _finding("every erasure done (its receipt says so)", {"not done": bad},
                    f"{len(w.erasures)} planned, {len(s.erasures)} sent, "
                    f"{len(s.erasures) - len(bad)} done")


def nothing_erased_remains(w: Workload, s: Snapshot, erased: Erased) -> Finding:
    users = {(e.tenant, e.subject) for e in w.erasures if e.target == "user"}
    erased_ids = {m.id for m in s.erased_memories}
    problems: dict[str, list[object]] = {
        "stored messages": [f"{m.tenant}/{m.event_id}" for m in s.messages
                            if (m.tenant, m.event_id) in erased],
        "ledger rows": [f"{cid}: {e}" for cid, events in sorted(s.ledger.items())
                        for e in events if (cid.split("/")[0], e) in erased],
        "Redis list entries": [f"{key}: {e}" for key, ids in sorted(s.redis_lists.items())
                               for e in ids if (key.split(":")[0], e) in erased],
        "memories judged from erased messages": [
            f"{m.tenant}/{m.cube}/{m.owner} {m.kind} {m.content!r}" for m in s.memories
            if any((m.tenant, e) in erased for e in m.source_event_ids)],
        "memories in an erased user's cube": [
            f"{m.tenant}/{m.owner} {m.kind} {m.content!r}" for m in s.memories
            if m.cube == "user_profile" and (m.tenant, m.owner) in users],
        "memories erased by id, still valid": [m.id for m in s.memories if m.id in erased_ids],
        "replies once settled": [
            f"{who}: {e}" for who, seen in sorted(s.after_erasure.items()) for e in seen
            if (who.split("/")[0], e) in erased or e.startswith("error:")],
        "rows naming an erased subject": [f"{k} x{n}" for k, n in sorted(s.leftovers.items())],
    }
    asked = sum(1 for _ in s.after_erasure)
    return _finding("nothing erased in any store or reply", problems,
                    f"{len(erased)} messages and {len(erased_ids)} memories erased; "
                    + ", ".join(f"{len(v)} {k}" for k, v in problems.items())
                    + f"; {asked} users asked once settled")


def erasure_checks(w: Workload, s: Snapshot, erased: Erased) -> list[Finding]:
    return [erasures_done(w, s), nothing_erased_remains(w, s, erased)]
