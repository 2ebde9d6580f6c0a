"""Which sessions a reprocess rebuilds, and whose memory a candidate is: table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.attribution import Author, attributed_user
from streams.consolidation.rules.reprocess_plan import Progress, StoredMessage, plan_sessions

T = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
GAP = 1800.0


def msg(i: int, minutes: float, seq: int | None, user: str = "u1",
        role: str = "user") -> StoredMessage:
    return StoredMessage(i, role, user, "a1", T + timedelta(minutes=minutes), seq)


DAY = [msg(1, 0, 1), msg(2, 1, 1, role="assistant"), msg(3, 60 * 24, 2), msg(4, 60 * 24 + 5, 2),
       msg(5, 60 * 48, 3)]


@pytest.mark.parametrize(("messages", "done", "kw", "expected"), [
    # stamped sessions up to the highest claimed one; the open one is left alone
    (DAY, Progress(2, 0), {}, [("1", (1, 2)), ("2", (3, 4))]),
    (DAY, Progress(3, 0), {}, [("1", (1, 2)), ("2", (3, 4)), ("3", (5,))]),
    (DAY, Progress(0, 0), {}, []),
    # since: a session is rebuilt whole when any of its messages is at or after it
    (DAY, Progress(3, 0), {"since": T + timedelta(minutes=60 * 24 + 1)},
     [("2", (3, 4)), ("3", (5,))]),
    (DAY, Progress(3, 0), {"since": T + timedelta(days=5)}, []),
    # user: only sessions the user speaks in
    ([msg(1, 0, 1, "alice"), msg(2, 1, 1, "bob"), msg(3, 100, 2, "bob")], Progress(2, 0),
     {"user": "alice"}, [("1", (1, 2))]),
    # unstamped messages (stored before sessions were stamped) cut by the gap in event time
    ([msg(1, 0, None), msg(2, 10, None), msg(3, 10 + 30, None), msg(4, 200, None)],
     Progress(0, 3), {}, [("u1", (1, 2)), ("u2", (3,))]),
    # out of order by id, in order by time
    ([msg(2, 0, None), msg(1, 5, None)], Progress(0, 2), {}, [("u1", (1, 2))]),
    # a session with no chat (tool output only) is nothing to rebuild
    ([msg(1, 0, 1, role="tool")], Progress(1, 0), {}, []),
])
def test_plan_sessions(messages: list[StoredMessage], done: Progress, kw: dict[str, object],
                       expected: list[tuple[str, tuple[int, ...]]]) -> None:
    planned = plan_sessions(messages, done, gap_s=GAP, **kw)  # type: ignore[arg-type]
    assert [(s.label, s.message_ids) for s in planned] == expected


def test_a_planned_session_names_its_last_speaker_and_its_span() -> None:
    s, = plan_sessions([msg(1, 0, 1, "alice"), msg(2, 3, 1, "bob"),
                        msg(3, 4, 1, "bob", role="assistant")], Progress(1, 0), gap_s=GAP)
    assert (s.user_id, s.agent_id, s.first_at, s.last_at) == (
        "bob", "a1", T, T + timedelta(minutes=4))


AUTHORS = {"e1": Author("user", "alice"), "e2": Author("assistant", "bob"),
           "e3": Author("user", "bob")}


@pytest.mark.parametrize(("sources", "expected"), [
    (("e1",), "alice"),
    (("e3",), "bob"),
    (("e2", "e1"), "alice"),  # a user's own words decide over the assistant's
    (("e2",), "bob"),  # assistant only: the user it answered
    (("e1", "e3"), "alice"),  # several speakers: the first
    (("zz",), "closer"),  # sources the session does not hold: the run's user
    ((), "closer"),
])
def test_attributed_user(sources: tuple[str, ...], expected: str) -> None:
    assert attributed_user(sources, AUTHORS, "closer") == expected
